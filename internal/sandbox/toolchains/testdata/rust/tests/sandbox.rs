//! The sandbox layout a Rust toolchain relies on.
use std::{env, fs, os::unix::fs::PermissionsExt, process::Command};

#[test]
fn executable_under_tmpdir_runs() {
    let dir = env::temp_dir().join(format!("rpn-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let script = dir.join("hello.sh");
    fs::write(&script, "#!/bin/sh\necho executable-tmp\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(&script).output().expect("run the script under TMPDIR");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "executable-tmp\n");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn home_and_xdg_writable() {
    for name in ["HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"] {
        let dir = env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
        let probe = std::path::Path::new(&dir).join(format!("probe-{}", std::process::id()));
        fs::write(&probe, "x").unwrap_or_else(|e| panic!("{name}={dir} is writable: {e}"));
        fs::remove_file(&probe).unwrap();
    }
}

#[test]
fn the_library_from_outside() {
    assert_eq!(forged_sample_rpn::eval("6 7 *"), Ok(42));
}
