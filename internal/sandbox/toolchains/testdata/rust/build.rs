// A build script: cargo compiles it and runs it before the crate, as many
// real crates do (cc, bindgen, version stamps).
use std::{env, fs, path::Path};

fn main() {
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    fs::write(
        Path::new(&out).join("operators.rs"),
        "pub const OPERATORS: &[char] = &['+', '-', '*', '/'];\n",
    )
    .expect("write the generated source");
    println!("cargo:rerun-if-changed=build.rs");
}
