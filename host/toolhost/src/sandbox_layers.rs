//! The kernel sandbox's layers as this host has them: each one available or
//! not, why not, what it needs from the machine or the container runtime and
//! what commands lose without it (docs/operations.md#the-sandbox-in-a-container).
//!
//! One source for the three places that report or enforce them: `toolhost
//! doctor` (`crate::doctor`), `/info`'s `sandbox.layers`
//! (`crate::mcp::health::sandbox_facts`) and `--require-sandbox`
//! ([`RequiredLayers`]). The facts come from the kernel probe
//! ([`toolhost_process::probe_kernel`], cached once per process) and from the
//! session engine's process tracking ([`Sessions::tracking_mechanism`]); the
//! layers themselves are applied by `host/process/src/sandbox/` (the order:
//! ARCHITECTURE.md, invariant "The kernel sandbox is applied last in the child;
//! fail closed").
//!
//! Network blocking is a layer of its own here although its mechanism is the
//! seccomp socket program: toolhost uses no network namespace
//! (`host/process/src/sandbox/seccomp.rs`, "Why seccomp rather than a fresh
//! network namespace").

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};
use toolhost_process::{KernelSupport, SandboxMode, SandboxPolicy, Sessions, TrackingMechanism};

/// The exit code of a command that refuses to start because a layer named by
/// `--require-sandbox` is missing: 69, `EX_UNAVAILABLE` of BSD's sysexits.h
/// (docs/cli.md#exit-codes-of-toolhost-call).
pub const EXIT_LAYER_MISSING: u8 = 69;

/// One layer of the sandbox, named in `toolhost doctor`, `/info` and
/// `--require-sandbox` by [`Layer::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// `user_namespace`: a process can create a user namespace, which the mount
    /// namespace needs when the host lacks `CAP_SYS_ADMIN` (not root, or root in a
    /// container without it).
    UserNamespace,
    /// `mount_namespace`: a private mount namespace per command: the state dir
    /// hidden, denied reads masked, `.git` read-only, a read-only root, private
    /// `/dev/shm` and ptys (`sandbox/mounts.rs`).
    MountNamespace,
    /// `landlock`: filesystem writes confined to the writable roots
    /// (`sandbox/landlock.rs`).
    Landlock,
    /// `seccomp`: the confinement program (no set-id modes, io_uring, keyrings)
    /// and the socket program (`sandbox/seccomp.rs`).
    Seccomp,
    /// `cgroup_v2`: one cgroup v2 per command: every descendant tracked and
    /// killed, the number of processes limited (`sessions/tree.rs`).
    CgroupV2,
    /// `network`: commands' sockets other than `AF_UNIX` refused by the seccomp
    /// socket program (no network namespace).
    Network,
}

impl Layer {
    /// Every layer, in the order they are reported (what `all` names).
    pub const ALL: [Layer; 6] = [
        Layer::UserNamespace,
        Layer::MountNamespace,
        Layer::Landlock,
        Layer::Seccomp,
        Layer::CgroupV2,
        Layer::Network,
    ];

    /// The name: `user_namespace`, `mount_namespace`, `landlock`, `seccomp`,
    /// `cgroup_v2`, `network`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::UserNamespace => "user_namespace",
            Layer::MountNamespace => "mount_namespace",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::CgroupV2 => "cgroup_v2",
            Layer::Network => "network",
        }
    }

    /// What the machine or the container runtime must give for this layer
    /// (measured with podman, docs/operations.md#the-sandbox-in-a-container).
    pub fn needs(self) -> &'static str {
        match self {
            Layer::UserNamespace => {
                "unshare(CLONE_NEWUSER) allowed: podman's default seccomp profile allows it; \
                 Docker's and containerd's default profiles (Kubernetes RuntimeDefault) only \
                 with CAP_SYS_ADMIN, so run with --security-opt seccomp=unconfined (Kubernetes: \
                 seccompProfile Unconfined) or a profile allowing unshare, and \
                 user.max_user_namespaces above 0"
            }
            Layer::MountNamespace => {
                "CAP_SYS_ADMIN or a user namespace (user_namespace), and unshare, mount, \
                 umount2 and mount_setattr allowed by the seccomp profile (--security-opt \
                 seccomp=unconfined or a profile allowing them)"
            }
            Layer::Landlock => {
                "a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK, landlock in the lsm= \
                 list) and landlock_create_ruleset, landlock_add_rule and landlock_restrict_self \
                 allowed by the seccomp profile"
            }
            Layer::Seccomp => {
                "a kernel with seccomp filters (CONFIG_SECCOMP_FILTER); a runtime's own filter \
                 does not stop the host from adding one"
            }
            Layer::CgroupV2 => {
                "a cgroup v2 hierarchy where the host's user may create cgroups: a systemd unit \
                 with Delegate=yes, or in a container a private cgroup namespace with \
                 /sys/fs/cgroup mounted read-write; and --process-tracking auto"
            }
            Layer::Network => "seccomp (the socket program), and no --allow-network",
        }
    }

    /// What commands lose without this layer.
    pub fn without(self) -> &'static str {
        match self {
            Layer::UserNamespace => {
                "a host without CAP_SYS_ADMIN gets no mount namespace (mount_namespace)"
            }
            Layer::MountNamespace => {
                "commands can read the state dir (other sessions' output, event logs), deny_read \
                 is not enforced, .git stays writable, metadata outside the workspace can \
                 change, no private /dev/shm or ptys"
            }
            Layer::Landlock => "filesystem writes outside the workspace are not confined",
            Layer::Seccomp => {
                "network and UNIX sockets are not blocked; setuid/setgid modes, io_uring and \
                 the kernel keyrings are not refused"
            }
            Layer::CgroupV2 => {
                "process trees are tracked by a cgroup v1 pids hierarchy or the subreaper and \
                 /proc scans: kills still reach every descendant, but without a pids \
                 controller the number of processes per command is not limited"
            }
            Layer::Network => "commands can use the network",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A layer name that is none of [`Layer::ALL`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown sandbox layer `{0}`: use all, or a comma-separated list of user_namespace, mount_namespace, landlock, seccomp, cgroup_v2, network"
)]
pub struct UnknownLayer(pub String);

impl FromStr for Layer {
    type Err = UnknownLayer;

    /// Exactly one of [`Layer::as_str`]'s names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layer::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLayer(s.to_owned()))
    }
}

/// One layer as this host has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerStatus {
    /// Which layer (serialized as its name).
    #[serde(rename = "name")]
    pub layer: Layer,
    /// The kernel and the runtime let the host apply it.
    pub available: bool,
    /// What the host has, e.g. `ABI 7`, `cgroup v2, at most 512 processes`,
    /// `subreaper and /proc scan, no process limit (...)`.
    pub detail: String,
    /// Landlock only: the ABI version the kernel reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abi: Option<i32>,
    /// When missing: why (the probe's error, or what the host found).
    pub reason: Option<String>,
    /// When missing: [`Layer::needs`].
    pub needs: Option<&'static str>,
    /// When missing: [`Layer::without`].
    pub without: Option<&'static str>,
}

impl LayerStatus {
    fn new(layer: Layer, available: bool, detail: String, reason: Option<String>) -> Self {
        LayerStatus {
            layer,
            available,
            detail,
            abi: None,
            reason: (!available).then(|| reason.unwrap_or_else(|| "not available".to_owned())),
            needs: (!available).then(|| layer.needs()),
            without: (!available).then(|| layer.without()),
        }
    }
}

/// Every layer of [`Layer::ALL`], in that order, from the kernel probe
/// `kernel` and the session engine's process tracking (`tracking`, and its
/// one-line description `tracking_line`, [`Sessions::tracking`]).
pub fn layers(
    kernel: &KernelSupport,
    tracking: TrackingMechanism,
    tracking_line: &str,
) -> Vec<LayerStatus> {
    let userns = LayerStatus::new(
        Layer::UserNamespace,
        kernel.user_namespaces,
        "unshare(CLONE_NEWUSER) works".to_owned(),
        kernel
            .user_namespaces_error
            .as_ref()
            .map(|e| format!("unshare(CLONE_NEWUSER): {e}")),
    );
    let mount = {
        let parts = [
            (kernel.private_shm, "private /dev/shm"),
            (kernel.private_pts, "private ptys"),
            (kernel.read_only_root, "read-only root"),
        ];
        let has: Vec<&str> = parts.iter().filter(|p| p.0).map(|p| p.1).collect();
        let lacks: Vec<&str> = parts.iter().filter(|p| !p.0).map(|p| p.1).collect();
        let mut detail = if has.is_empty() {
            "private mount namespace".to_owned()
        } else {
            format!("private mount namespace with {}", has.join(", "))
        };
        if !lacks.is_empty() && kernel.mount_namespace {
            detail.push_str(&format!("; without {}", lacks.join(", ")));
        }
        LayerStatus::new(
            Layer::MountNamespace,
            kernel.mount_namespace,
            detail,
            kernel
                .mount_namespace_error
                .as_ref()
                .map(|e| format!("unshare(CLONE_NEWNS): {e}")),
        )
    };
    let landlock = {
        let abi = kernel.landlock_abi.filter(|abi| *abi >= 1);
        let mut status = LayerStatus::new(
            Layer::Landlock,
            abi.is_some(),
            abi.map(|a| format!("ABI {a}"))
                .unwrap_or_else(|| "no Landlock".to_owned()),
            Some(
                "the kernel reports no Landlock ABI (not built in, not enabled at boot, or \
                 landlock_create_ruleset refused)"
                    .to_owned(),
            ),
        );
        status.abi = abi;
        status
    };
    let seccomp = LayerStatus::new(
        Layer::Seccomp,
        kernel.seccomp,
        "seccomp filters".to_owned(),
        Some("prctl(PR_GET_SECCOMP) failed: the kernel has no seccomp".to_owned()),
    );
    let cgroup = LayerStatus::new(
        Layer::CgroupV2,
        tracking == TrackingMechanism::CgroupV2,
        tracking_line.to_owned(),
        Some(format!("process tracking: {tracking_line}")),
    );
    let network = LayerStatus::new(
        Layer::Network,
        kernel.seccomp,
        "the seccomp socket program (no network namespace)".to_owned(),
        Some("no seccomp, so no socket program".to_owned()),
    );
    vec![userns, mount, landlock, seccomp, cgroup, network]
}

/// [`layers`] of a running session engine: the cached kernel probe and
/// `sessions`' process tracking.
pub fn of_sessions(sessions: &Sessions) -> Vec<LayerStatus> {
    layers(
        &toolhost_process::probe_kernel(),
        sessions.tracking_mechanism(),
        sessions.tracking(),
    )
}

/// `{name: available}` for each layer, what `/info` shows (no reason text:
/// it may name paths).
pub fn availability(statuses: &[LayerStatus]) -> Value {
    let map: Map<String, Value> = statuses
        .iter()
        .map(|s| (s.layer.as_str().to_owned(), Value::Bool(s.available)))
        .collect();
    Value::Object(map)
}

/// The value of `--require-sandbox`: `all` ([`Layer::ALL`]) or a comma-separated
/// list of layer names, each once, in [`Layer::ALL`]'s order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredLayers(Vec<Layer>);

impl FromStr for RequiredLayers {
    type Err = UnknownLayer;

    /// `all`, or names separated by commas (spaces around them ignored);
    /// empty or unknown names are [`UnknownLayer`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "all" {
            return Ok(RequiredLayers(Layer::ALL.to_vec()));
        }
        let mut layers = s
            .split(',')
            .map(|name| name.trim().parse())
            .collect::<Result<Vec<Layer>, _>>()?;
        layers.sort();
        layers.dedup();
        Ok(RequiredLayers(layers))
    }
}

impl RequiredLayers {
    /// The layers named.
    pub fn layers(&self) -> &[Layer] {
        &self.0
    }

    /// Why requiring these layers contradicts the operator's own `policy`, if it
    /// does: `--sandbox full-access` confines nothing, and `--allow-network`
    /// turns the `network` layer off.
    pub fn conflict(&self, policy: &SandboxPolicy) -> Option<String> {
        if policy.mode == SandboxMode::FullAccess && !self.0.is_empty() {
            return Some(
                "--require-sandbox contradicts --sandbox full-access, which applies no layer"
                    .to_owned(),
            );
        }
        (policy.network && self.0.contains(&Layer::Network)).then(|| {
            "--require-sandbox network contradicts --allow-network, which lets commands use \
             the network"
                .to_owned()
        })
    }

    /// `Ok` when every required layer is available in `statuses`, else the
    /// missing ones ([`LayersMissing`]).
    pub fn check(&self, statuses: &[LayerStatus]) -> Result<(), LayersMissing> {
        let missing: Vec<LayerStatus> = statuses
            .iter()
            .filter(|s| self.0.contains(&s.layer) && !s.available)
            .cloned()
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(LayersMissing(missing))
        }
    }
}

/// Layers `--require-sandbox` named that this host does not have: the command
/// refuses to start (exit [`EXIT_LAYER_MISSING`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LayersMissing(pub Vec<LayerStatus>);

impl fmt::Display for LayersMissing {
    /// `refusing to start: --require-sandbox names layers this host does not
    /// have: mount_namespace (REASON; needs: NEEDS; without it: WITHOUT); ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refusing to start: --require-sandbox names layers this host does not have: ")?;
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(
                f,
                "{} ({}; needs: {}; without it: {})",
                s.layer,
                s.reason.as_deref().unwrap_or("not available"),
                s.layer.needs(),
                s.layer.without()
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(ok: bool) -> KernelSupport {
        KernelSupport {
            landlock_abi: ok.then_some(7),
            seccomp: ok,
            user_namespaces: ok,
            user_namespaces_error: (!ok).then(|| "Operation not permitted (os error 1)".into()),
            mount_namespace: ok,
            mount_namespace_error: (!ok).then(|| "Operation not permitted (os error 1)".into()),
            private_shm: ok,
            private_pts: ok,
            read_only_root: ok,
        }
    }

    #[test]
    fn names_parse_back_and_all_is_every_layer() {
        for l in Layer::ALL {
            assert_eq!(l.as_str().parse::<Layer>(), Ok(l));
        }
        assert_eq!(
            "all".parse::<RequiredLayers>().unwrap().layers(),
            Layer::ALL.as_slice()
        );
        assert_eq!(
            "network, landlock,landlock"
                .parse::<RequiredLayers>()
                .unwrap()
                .layers(),
            [Layer::Landlock, Layer::Network].as_slice()
        );
        assert_eq!(
            "landlock,cgroups".parse::<RequiredLayers>(),
            Err(UnknownLayer("cgroups".into()))
        );
        assert_eq!(
            "".parse::<RequiredLayers>(),
            Err(UnknownLayer(String::new()))
        );
    }

    #[test]
    fn a_missing_layer_says_why_and_what_it_needs() {
        let all = layers(&kernel(true), TrackingMechanism::CgroupV2, "cgroup v2");
        assert!(all.iter().all(|s| s.available && s.reason.is_none()));
        assert_eq!(all[2].abi, Some(7));
        let none = layers(&kernel(false), TrackingMechanism::Subreaper, "subreaper");
        assert!(none.iter().all(|s| !s.available && s.needs.is_some()));
        assert_eq!(
            none[1].reason.as_deref(),
            Some("unshare(CLONE_NEWNS): Operation not permitted (os error 1)")
        );
        let required: RequiredLayers = "mount_namespace,seccomp".parse().unwrap();
        assert_eq!(required.check(&all), Ok(()));
        let err = required.check(&none).unwrap_err();
        assert_eq!(
            err.0.iter().map(|s| s.layer).collect::<Vec<_>>(),
            [Layer::MountNamespace, Layer::Seccomp]
        );
        assert!(
            err.to_string()
                .starts_with("refusing to start: --require-sandbox names layers this host does not have: mount_namespace (unshare(CLONE_NEWNS): Operation not permitted"),
            "{err}"
        );
    }

    #[test]
    fn requiring_what_the_operator_turned_off_is_a_contradiction() {
        let network: RequiredLayers = "network".parse().unwrap();
        let open = SandboxPolicy {
            network: true,
            ..SandboxPolicy::default()
        };
        assert!(network.conflict(&open).is_some());
        assert!(network.conflict(&SandboxPolicy::default()).is_none());
        let landlock: RequiredLayers = "landlock".parse().unwrap();
        let full = SandboxPolicy {
            mode: SandboxMode::FullAccess,
            ..SandboxPolicy::default()
        };
        assert!(landlock.conflict(&full).is_some());
    }
}
