//! Python tools from PyPI for the tests (the real `pre-commit`, Helm as `helm-sdkpy`), each in
//! a virtualenv kept under the cargo target directory and reused while it has the pinned
//! versions. Only the ecosystem suite (tier 2: `#[ignore = "e2e: ..."]` tests, run with
//! `-- --ignored`) uses them; there a missing Python, venv or PyPI fails the test with what to
//! install.

use crate::process::{output, text};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

/// A virtualenv with pinned packages from PyPI, kept under the cargo target directory.
pub struct Venv<'a> {
    /// Where it lives; reused while it has `packages`, recreated otherwise.
    pub dir: PathBuf,
    /// `name==version` requirements.
    pub packages: &'a [&'a str],
    /// Modules that must import for the virtualenv to count as installed.
    pub imports: &'a [&'a str],
    /// More arguments for `pip install`.
    pub pip_args: &'a [&'a str],
    /// Who needs it, for the messages: "the pre-commit tests".
    pub needed_by: &'a str,
}

impl Venv<'_> {
    /// The virtualenv's python, after creating the virtualenv and installing `packages` unless
    /// it already has them. `PYTHON` names another base interpreter than `python3`.
    pub fn python(&self) -> PathBuf {
        let Venv {
            dir,
            packages,
            imports,
            pip_args,
            needed_by,
        } = self;
        let python = dir.join("bin").join("python");
        let names: Vec<&str> = packages
            .iter()
            .map(|p| p.split_once("==").expect("a pinned package").0)
            .collect();
        let wanted = packages.join(" ").to_lowercase();
        let probe = format!(
            "import importlib.metadata as m{}; \
             print(' '.join(f'{{p}}=={{m.version(p)}}'.lower() for p in {names:?}))",
            imports.iter().map(|i| format!(", {i}")).collect::<String>()
        );
        let installed = |python: &Path| {
            python.exists()
                && String::from_utf8_lossy(
                    &output(Command::new(python).args(["-c", &probe])).stdout,
                )
                .trim()
                    == wanted
        };
        if installed(&python) {
            return python;
        }
        let started = Instant::now();
        let _ = fs::remove_dir_all(dir);
        let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let made = output(Command::new(&base).arg("-m").arg("venv").arg(dir));
        assert!(
            made.status.success(),
            "`{base} -m venv` failed: {needed_by} need Python 3.11 or later with venv (on \
             Debian or Ubuntu `apt-get install python3 python3-venv`; `PYTHON` names another \
             interpreter):\n{}",
            text(&made)
        );
        let pip = output(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                ])
                .args(*pip_args)
                .args(*packages),
        );
        assert!(
            pip.status.success(),
            "pip could not install {} ({}): {needed_by} need PyPI (https://pypi.org) or a \
             mirror (`PIP_INDEX_URL`)\n{}",
            packages.join(" "),
            pip.status,
            text(&pip)
        );
        assert!(
            installed(&python),
            "{wanted} not importable from {}",
            dir.display()
        );
        eprintln!(
            "installed {wanted} into {} in {:.1?}",
            dir.display(),
            started.elapsed()
        );
        python
    }
}

/// Helm (the Helm v4 library that the PyPI package `helm-sdkpy` bundles), PyYAML and
/// `cel-expr-python`, pinned; bump them deliberately.
pub const HELM_PACKAGES: [&str; 3] = [
    "helm-sdkpy==0.1.32",
    "PyYAML==6.0.3",
    "cel-expr-python==0.1.3",
];

/// The python of the Helm virtualenv, created once per target directory (`target_tmpdir` is the
/// test's `CARGO_TARGET_TMPDIR`, the same for every crate of a target directory, so every test
/// binary shares one).
pub fn helm_python(target_tmpdir: &str) -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        Venv {
            dir: Path::new(target_tmpdir).join("helm-chart").join(format!(
                "venv-{}",
                HELM_PACKAGES.join("-").replace("==", "-")
            )),
            packages: &HELM_PACKAGES,
            imports: &["helm_sdkpy", "yaml", "cel_expr_python"],
            // helm-sdkpy says Python >= 3.12; its bundled library and cffi code run on 3.11.
            pip_args: &["--ignore-requires-python"],
            needed_by: "the Helm chart tests",
        }
        .python()
    })
}
