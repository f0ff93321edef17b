//! [`download`] against a fake pip: a shell script that prints on both streams and leaves a
//! wheel (or fails) the way `pip download` does.

use std::path::Path;
use std::process::Command;

use super::*;

/// The wheel's content the fake pip writes; pinned through `sha256_hex(CONTENT)`.
const CONTENT: &[u8] = b"fake wheel";
const MARKER: &str = "fake-pip-chatter";
const CHILD_ENV: &str = "RCP_WHEEL_TEST_CHILD";

/// A `pip` that prints [`MARKER`] on stdout and stderr, then writes `body` as the wheel of
/// `fake-pkg==1.0` into the `-d` directory and exits with `code`.
fn fake_pip(dir: &Path, body: &str, code: i32) -> String {
    let script = dir.join("pip.sh");
    let text = format!(
        "echo {MARKER} stdout\necho {MARKER} stderr >&2\nwhile [ $# -gt 0 ]; do [ \"$1\" = -d ] && d=$2; shift; done\n\
         [ {code} -eq 0 ] || {{ echo 'ERROR: No matching distribution found for fake-pkg==1.0' >&2; exit {code}; }}\n\
         printf '%s' '{body}' > \"$d/other_pkg-1.0-py3-none-any.whl\"\n\
         printf '%s' '{body}' > \"$d/fake_pkg-1.0-py3-none-any.whl\"\n"
    );
    std::fs::write(&script, text).expect("write script");
    format!("sh {}", script.display())
}

fn pinned() -> WheelSpec {
    // Leaked once per test: `WheelSpec` holds `'static` strings, as pinned tables do.
    WheelSpec::new("fake-pkg", "1.0").sha256(Box::leak(sha256_hex(CONTENT).into_boxed_str()))
}

fn fetch(rcp_pip: &str, spec: &WheelSpec, dest: &Path) -> Result<PathBuf, WheelError> {
    download_with(pip::pip_commands(Some(rcp_pip)), spec, dest, &mut |_| {})
}

#[test]
fn the_pinned_wheel_is_found_and_verified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pip = fake_pip(dir.path(), "fake wheel", 0);
    let mut heard = Vec::new();
    let dest = dir.path().join("wheels");
    let commands = pip::pip_commands(Some(&pip));
    let got = download_with(commands, &pinned(), &dest, &mut |m| heard.push(m.to_owned())).expect("download");
    assert_eq!(got, dest.join("fake_pkg-1.0-py3-none-any.whl"));
    assert_eq!(heard, ["download fake-pkg==1.0 (pip)"]);
}

#[test]
fn a_damaged_wheel_is_refused_with_advice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pip = fake_pip(dir.path(), "fake wheeL", 0);
    let err = fetch(&pip, &pinned(), dir.path()).expect_err("wrong hash");
    assert!(matches!(err, WheelError::HashMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("fake_pkg-1.0-py3-none-any.whl") && msg.contains("fake-pkg==1.0"), "{msg}");
    assert!(msg.contains(&sha256_hex(b"fake wheeL")) && msg.contains("delete the file and run again"), "{msg}");
    let unpinned = WheelSpec::new("fake-pkg", "1.0");
    assert!(fetch(&pip, &unpinned, dir.path()).is_ok(), "an unpinned wheel is not checked");
}

#[test]
fn a_failing_pip_is_reported_with_its_stderr_and_advice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pip = fake_pip(dir.path(), "", 3);
    let msg = fetch(&pip, &pinned(), dir.path()).expect_err("pip fails").to_string();
    assert!(msg.starts_with("pip download fake-pkg==1.0 failed: sh "), "{msg}");
    assert!(msg.contains("exit status: 3") && msg.contains("No matching distribution found"), "{msg}");
    assert!(msg.contains("RCP_PIP"), "{msg}");
    let missing = fetch("/nonexistent/pip", &pinned(), dir.path()).expect_err("no such pip").to_string();
    assert!(missing.contains("/nonexistent/pip not found"), "{missing}");
}

#[test]
fn a_wheel_pip_did_not_leave_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pip = fake_pip(dir.path(), "fake wheel", 0);
    let other = WheelSpec::new("fake-pkg", "2.0");
    let msg = fetch(&pip, &other, dir.path()).expect_err("no 2.0 wheel").to_string();
    assert!(msg.contains("left no fake_pkg-2.0-*.whl"), "{msg}");
}

#[test]
fn platform_tags_reach_pip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("args");
    let script = dir.path().join("pip.sh");
    let text = format!(
        "echo \"$@\" > {}\nwhile [ $# -gt 0 ]; do [ \"$1\" = -d ] && d=$2; shift; done\n: > \"$d/fake_pkg-1.0-cp311-cp311-x.whl\"\n",
        log.display()
    );
    std::fs::write(&script, text).expect("write script");
    let target =
        Target { platform: "manylinux2014_x86_64", python_version: "3.11", implementation: "cp", abi: "cp311" };
    let spec = WheelSpec::new("fake-pkg", "1.0").target(target);
    let mut heard = String::new();
    let commands = pip::pip_commands(Some(&format!("sh {}", script.display())));
    download_with(commands, &spec, dir.path(), &mut |m| heard = m.to_owned()).expect("download");
    let args = std::fs::read_to_string(&log).expect("args");
    let tags = "--python-version 3.11 --implementation cp --abi cp311 --platform manylinux2014_x86_64";
    assert!(args.starts_with("download --no-deps --only-binary=:all:") && args.contains(tags), "{args}");
    assert!(args.trim_end().ends_with("fake-pkg==1.0"), "{args}");
    assert_eq!(heard, "download fake-pkg==1.0 (pip, manylinux2014_x86_64)");
}

/// Runs [`download`] itself, reading `RCP_PIP` from the environment; a no-op unless started by
/// [`pip_output_never_reaches_stdout`].
#[test]
fn child_downloads_with_rcp_pip() {
    let Some(dest) = std::env::var_os(CHILD_ENV) else { return };
    download(&pinned(), Path::new(&dest), &mut |_| {}).expect("download in the child");
}

#[test]
fn pip_output_never_reaches_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pip = fake_pip(dir.path(), "fake wheel", 0);
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "tests::child_downloads_with_rcp_pip", "--test-threads=1"])
        .env(PIP_ENV, &pip)
        .env(CHILD_ENV, dir.path())
        .output()
        .expect("run the child");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed: {stdout}{stderr}");
    assert!(dir.path().join("fake_pkg-1.0-py3-none-any.whl").is_file(), "the child ran the fake pip");
    assert!(!stdout.contains(MARKER), "pip's output reached stdout: {stdout}");
    assert!(stderr.contains(&format!("{MARKER} stdout")), "pip's stdout goes to stderr: {stderr}");
}
