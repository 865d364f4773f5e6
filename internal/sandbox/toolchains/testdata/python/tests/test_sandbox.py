"""The sandbox layout a Python toolchain relies on."""
import os
import subprocess


def test_tmp_path_executable(tmp_path):
    # pytest's tmp_path lives under TMPDIR; tests often build and run helpers there.
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho executable-tmp\n")
    script.chmod(0o755)
    assert subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout == "executable-tmp\n"


def test_home_and_xdg_writable():
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        directory = os.environ[name]
        probe = os.path.join(directory, f"probe-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("x")
        os.remove(probe)
