//! The rules, one file per rule: its metadata and docs, its check, its fix with the
//! applicability it declares, and its tests. The contract they implement is [`rule`]; the
//! catalog that lists them sits above ([`crate::catalog`]).

pub mod rule;
mod support;

pub(crate) mod args_repeat_entrypoint;
pub(crate) mod duplicate_key;
pub(crate) mod exec_probe_heavy;
pub(crate) mod gpu_graceful_shutdown_missing;
pub(crate) mod gpu_readiness_probe_missing;
pub(crate) mod gpu_serving_role_unknown;
pub(crate) mod gpu_serving_without_pdb;
pub(crate) mod gpu_startup_probe_missing;
pub(crate) mod grpc_probe_unsupported;
pub(crate) mod hpa_cpu_metric_on_gpu_workload;
pub(crate) mod hpa_min_replicas_one;
pub(crate) mod hpa_scale_up_outpaces_load;
pub(crate) mod known_server_endpoint;
pub(crate) mod liveness_checks_readiness;
pub(crate) mod liveness_restart_loop;
pub(crate) mod liveness_restarts_busy_server;
pub(crate) mod lws_kill_recreates_group;
pub(crate) mod lws_leader_ready_needs_workers;
pub(crate) mod model_exceeds_storage_limit;
pub(crate) mod pdb_blocks_gpu_drains;
pub(crate) mod pod_spec_invalid;
pub(crate) mod probe_port_undeclared;
pub(crate) mod probe_threshold_invalid;
pub(crate) mod progress_deadline_too_short;
pub(crate) mod readiness_drops_every_replica;
pub(crate) mod readiness_port_open;
pub(crate) mod readiness_timeout_too_short;
pub(crate) mod startup_budget_too_short;
pub(crate) mod startup_shorter_than_operator;
pub(crate) mod vllm_service_links;

#[cfg(test)]
pub(crate) mod testing;
