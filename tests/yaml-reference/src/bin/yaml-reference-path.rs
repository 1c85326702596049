//! Prints the path of Kubernetes' decoder built for the differential tests, building it first
//! when this machine has not (needs Go). `fuzz/run.sh` hands it to the `yaml_differential`
//! target.

fn main() {
    match probelint_yaml_reference::binary() {
        Ok(path) => println!("{}", path.display()),
        Err(e) => {
            eprintln!("yaml-reference-path: {e}");
            std::process::exit(2);
        }
    }
}
