//! The YAML layers of probelint, knowing nothing of its rules: [`load`] reads Kubernetes manifests
//! (YAML 1.1, as the apiserver reads them, or JSON) into JSON values with the location of every
//! node, within limits that bound hostile input; [`patch`] applies JSON Patch operations to the
//! text itself, keeping comments and layout, and refuses any edit that would not read back as the
//! patched object. The same split as zizmor's `yamlpath`/`yamlpatch`.

pub mod load;
pub mod patch;
