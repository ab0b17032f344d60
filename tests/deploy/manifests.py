"""Checks deploy/kubernetes/*.yaml (run by tests/all/deploy.rs from .venv).

Each object is validated by kubernetes-validate against the Kubernetes 1.37
schemas in strict mode (unknown fields refused); the SandboxTemplate, whose
schema is agent-sandbox's CRD and not among them, has its pod template and
claim templates validated as the core kinds they are, and its own fields
checked against the CRD's v1beta1 field list. Then what docs/operations.md
promises: probes on /health and /ready at the served port, the state dir and
the workspace on claim templates, the token from a Secret mounted read-only
as a file, the securityContext that gives the full sandbox, the image,
serve's arguments, and a termination grace that leaves serve its drain
(docs/operations.md#stopping-and-draining): terminationGracePeriodSeconds at
least --drain-timeout plus the longest stop after it, which tests/all/deploy.rs
passes as TOOLHOST_STOP_AFTER_DRAIN_MAX_SECS (drain.rs's STOP_AFTER_DRAIN_MAX).
The Secret of tokens-secret.yaml: valid, named as the pods mount it, its
`tokens.toml` of the documented shape (names, SHA-256 digests only, known
scopes); with a path argument, that `tokens.toml` is written there for
tests/all/deploy.rs to start the real binary with. Prints one line per object
checked; exits non-zero on the first failure.
"""

import os
import re
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = "1.37.0"
PORT = 8765
# serve's arguments in both manifests (the image's default, deploy/Containerfile,
# takes one --token-file instead).
TOKENS = "/run/secrets/toolhost/tokens.toml"
ARGS = [
    "serve", "--http", f"0.0.0.0:{PORT}",
    "--tokens-file", TOKENS,
    "--workspace", "/workspace",
    "--state-dir", "/var/lib/toolhost/state",
    "--require-sandbox", "user_namespace,mount_namespace,landlock,seccomp,network",
    "--drain-timeout", "20s",
]
# How long serve may take to exit after its drain window, in seconds.
STOP_AFTER_DRAIN_MAX = int(os.environ["TOOLHOST_STOP_AFTER_DRAIN_MAX_SECS"])
# agent-sandbox's SandboxTemplate (extensions.agents.x-k8s.io/v1beta1): the
# properties of `spec` in its CRD, `podTemplate` required.
SANDBOX_TEMPLATE_SPEC = {
    "envVarsInjectionPolicy", "networkPolicy", "networkPolicyManagement",
    "podTemplate", "service", "volumeClaimTemplates", "volumeClaimTemplatesPolicy",
}


def validate(obj, what):
    try:
        kubernetes_validate.validate(obj, K8S, strict=True)
    except kubernetes_validate.ValidationError as e:
        sys.exit(f"{what}: {e.message} at {'.'.join(map(str, e.path))}")
    print(f"ok: {what} valid against Kubernetes {K8S} (strict)")


def check(cond, what):
    if not cond:
        sys.exit(f"FAILED: {what}")


def drain_seconds(args):
    """--drain-timeout's value in seconds (`0`, `Nms`, `Ns`, `Nm`/`Nmin`), 20 without it."""
    if "--drain-timeout" not in args:
        return 20
    value = args[args.index("--drain-timeout") + 1]
    m = re.fullmatch(r"(\d+)(ms|s|m|min)?", value)
    check(m is not None and (m.group(2) or m.group(1) == "0"), f"--drain-timeout {value}")
    n, unit = int(m.group(1)), m.group(2) or "s"
    return n * {"ms": 0.001, "s": 1, "m": 60, "min": 60}[unit]


def check_pod(spec, claims, what):
    """The pod of either manifest; `claims`: the claim template names."""
    sc = spec["securityContext"]
    check(sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001, f"{what}: non-root 10001")
    check(sc["fsGroup"] == 10001, f"{what}: fsGroup")
    check(sc["seccompProfile"] == {"type": "Unconfined"}, f"{what}: seccomp Unconfined")
    check(sc["appArmorProfile"] == {"type": "Unconfined"}, f"{what}: AppArmor Unconfined")
    check(spec["automountServiceAccountToken"] is False, f"{what}: no service account token")
    [c] = spec["containers"]
    check(c["image"] == "localhost/toolhost:latest", f"{what}: image")
    check(c["args"] == ARGS, f"{what}: args {c['args']}")
    grace = spec["terminationGracePeriodSeconds"]
    drain = drain_seconds(c["args"])
    check(grace >= drain + STOP_AFTER_DRAIN_MAX,
          f"{what}: terminationGracePeriodSeconds {grace} < --drain-timeout {drain} s "
          f"+ {STOP_AFTER_DRAIN_MAX} s: Kubernetes would SIGKILL serve during its stop")
    [port] = c["ports"]
    check(port == {"name": "http", "containerPort": PORT, "protocol": "TCP"}, f"{what}: port")
    for probe, path in [("livenessProbe", "/health"), ("readinessProbe", "/ready"),
                        ("startupProbe", "/health")]:
        get = c[probe]["httpGet"]
        check(get["path"] == path and get["port"] in ("http", PORT), f"{what}: {probe} {get}")
    csc = c["securityContext"]
    check(csc["allowPrivilegeEscalation"] is False, f"{what}: allowPrivilegeEscalation")
    check(csc["readOnlyRootFilesystem"] is True, f"{what}: readOnlyRootFilesystem")
    check(csc["capabilities"] == {"drop": ["ALL"]}, f"{what}: capabilities")
    check("privileged" not in csc, f"{what}: not privileged")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    check(mounts["state"]["mountPath"] == "/var/lib/toolhost", f"{what}: state mount")
    check(mounts["workspace"]["mountPath"] == "/workspace", f"{what}: workspace mount")
    check(mounts["tokens"] == {"name": "tokens", "mountPath": str(Path(TOKENS).parent),
                               "readOnly": True}, f"{what}: tokens mount")
    volumes = {v["name"]: v for v in spec["volumes"]}
    check(volumes["tokens"]["secret"]["secretName"] == "toolhost-tokens", f"{what}: Secret")
    # Readable by the group the kubelet gives it (fsGroup), never world.
    check(volumes["tokens"]["secret"]["defaultMode"] == 0o440, f"{what}: Secret mode")
    check("items" not in volumes["tokens"]["secret"], f"{what}: every key, as tokens.toml")
    for name in ("state", "workspace"):
        check(name in claims and name not in volumes, f"{what}: {name} from a claim template")


def main():
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/statefulset.yaml").read_text()))
    kinds = [(d["apiVersion"], d["kind"]) for d in docs]
    check(kinds == [("v1", "Service"), ("apps/v1", "StatefulSet")], f"statefulset.yaml: {kinds}")
    service, sts = docs
    for d in docs:
        validate(d, f"statefulset.yaml {d['kind']}")
    check(service["spec"]["clusterIP"] == "None", "Service: headless")
    check(service["spec"]["ports"] == [{"name": "http", "port": PORT, "targetPort": "http",
                                        "protocol": "TCP"}], "Service: port")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    check(service["spec"]["selector"] == labels == sts["spec"]["selector"]["matchLabels"],
          "Service and StatefulSet select the pod")
    check(sts["spec"]["serviceName"] == service["metadata"]["name"], "serviceName")
    check(sts["spec"]["replicas"] == 1, "one toolhost per workspace")
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    check_pod(sts["spec"]["template"]["spec"], claims, "StatefulSet")
    print("ok: StatefulSet and Service: probes, volumes, securityContext, image, Secret, grace")

    [tpl] = yaml.safe_load_all((ROOT / "deploy/kubernetes/sandbox-template.yaml").read_text())
    check((tpl["apiVersion"], tpl["kind"]) == ("extensions.agents.x-k8s.io/v1beta1",
                                               "SandboxTemplate"), "SandboxTemplate kind")
    spec = tpl["spec"]
    check(set(spec) <= SANDBOX_TEMPLATE_SPEC, f"SandboxTemplate fields: {set(spec)}")
    check(spec["service"] is True, "SandboxTemplate: a Service per Sandbox")
    check(spec["networkPolicyManagement"] in ("Managed", "Unmanaged"), "networkPolicyManagement")
    check(spec["networkPolicy"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": PORT}]}],
          "SandboxTemplate: ingress on the served port only")
    validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "toolhost"},
              "template": spec["podTemplate"]}, "SandboxTemplate podTemplate as a PodTemplate")
    for t in spec["volumeClaimTemplates"]:
        validate({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **t},
                 f"SandboxTemplate claim template {t['metadata']['name']}")
    claims = {t["metadata"]["name"] for t in spec["volumeClaimTemplates"]}
    check_pod(spec["podTemplate"]["spec"], claims, "SandboxTemplate")
    # The same pod as the StatefulSet's, so the two cannot drift apart.
    check(spec["podTemplate"]["spec"] == sts["spec"]["template"]["spec"],
          "SandboxTemplate's pod is the StatefulSet's")
    check(spec["volumeClaimTemplates"] == sts["spec"]["volumeClaimTemplates"],
          "SandboxTemplate's claims are the StatefulSet's")
    print("ok: SandboxTemplate: fields, pod and claims as the StatefulSet's")

    [secret] = yaml.safe_load_all((ROOT / "deploy/kubernetes/tokens-secret.yaml").read_text())
    validate(secret, "tokens-secret.yaml Secret")
    check((secret["kind"], secret["metadata"]["name"]) == ("Secret", "toolhost-tokens"),
          "the Secret the pods mount")
    check(set(secret["stringData"]) == {Path(TOKENS).name}, "one key, tokens.toml")
    text = secret["stringData"][Path(TOKENS).name]
    entries = tomllib.loads(text)["token"]
    names = [e["name"] for e in entries]
    check(len(set(names)) == len(names) >= 2, f"distinct named tokens: {names}")
    digests = [e.get("sha256", "") for e in entries]
    check(len(set(digests)) == len(digests), "distinct digests")
    for e in entries:
        check(set(e) <= {"name", "sha256", "scopes"}, f"{e['name']}: a digest, never a token")
        check(re.fullmatch(r"[0-9a-f]{64}", e["sha256"]) is not None, f"{e['name']}: sha256")
        check(set(e.get("scopes", [])) <= {"call", "answer", "metrics", "admin"},
              f"{e['name']}: scopes {e.get('scopes')}")
    print(f"ok: tokens-secret.yaml: {', '.join(names)}, digests only, known scopes")
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text)


if __name__ == "__main__":
    main()
