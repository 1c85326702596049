//! Files laid out the way the kubelet mounts a Secret (or a ConfigMap) into a Pod.

use std::path::{Path, PathBuf};

/// A directory laid out like a Secret volume: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..<timestamp>`; [`SecretDir::rotate`] swaps `..data` atomically, as the kubelet does
/// when the Secret changes, so a file watcher sees what it sees in a Pod.
pub struct SecretDir {
    pub dir: PathBuf,
    generation: u32,
}

impl SecretDir {
    pub fn create(dir: &Path, files: &[(&str, &str)]) -> SecretDir {
        std::fs::create_dir_all(dir).expect("secret dir");
        let mut secret = SecretDir {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        secret.write_generation(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name))
                .expect("file symlink");
        }
        secret
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a new timestamped directory, points `..data_tmp` at it and renames that over
    /// `..data` (atomic), then removes the previous directory.
    pub fn rotate(&mut self, files: &[(&str, &str)]) {
        let old = self.generation_dir(self.generation);
        self.write_generation(files);
        std::fs::remove_dir_all(old).expect("remove the old generation");
    }

    fn generation_dir(&self, generation: u32) -> PathBuf {
        self.dir.join(format!(
            "..2026_11_30_00_00_{generation:02}.{}",
            1000 + generation
        ))
    }

    fn write_generation(&mut self, files: &[(&str, &str)]) {
        self.generation += 1;
        let target = self.generation_dir(self.generation);
        std::fs::create_dir(&target).expect("generation dir");
        for (name, content) in files {
            std::fs::write(target.join(name), content).expect("write secret file");
        }
        let tmp = self.dir.join("..data_tmp");
        let name = target.file_name().expect("name").to_owned();
        std::os::unix::fs::symlink(&name, &tmp).expect("..data_tmp symlink");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_links_through_data_and_a_rotation_swaps_them_all() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut secret = SecretDir::create(&tmp.path().join("s"), &[("a", "1"), ("b", "2")]);
        let read = |name: &str| std::fs::read_to_string(secret_path(&tmp, name)).expect("read");
        assert_eq!((read("a"), read("b")), ("1".to_owned(), "2".to_owned()));
        let link = std::fs::read_link(tmp.path().join("s/a")).expect("a link");
        assert_eq!(link, Path::new("..data/a"));
        let first = std::fs::read_link(tmp.path().join("s/..data")).expect("..data");
        secret.rotate(&[("a", "3"), ("b", "4")]);
        assert_eq!((read("a"), read("b")), ("3".to_owned(), "4".to_owned()));
        assert!(
            !tmp.path().join("s").join(first).exists(),
            "the old generation is gone"
        );
        assert_eq!(secret.path("a"), tmp.path().join("s/a"));
    }

    fn secret_path(tmp: &tempfile::TempDir, name: &str) -> PathBuf {
        tmp.path().join("s").join(name)
    }
}
