#!/usr/bin/env python3
"""Checks the manifests in deploy/k8s for what a sharded qbench run depends on.

    python3 deploy/k8s/check.py [--dir DIR]   # the manifests; one line, OK or what is wrong
    python3 deploy/k8s/check.py --self-test   # broken copies must each be rejected

Kubernetes itself would accept most of the mistakes checked here (a Job whose parallelism is
not its shard count, a Service without the UDP port, a report path outside the shared volume);
the run would then fail, or worse, measure something else.

Needs PyYAML (Debian: python3-yaml) and the binaries, whose --help lists the flags the
manifests may use: $QBENCH and $QBENCH_SERVER, by default target/release/qbench and
target/release/qbench-server under the repository root.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

try:
    import yaml
except ImportError:
    sys.exit("check.py: needs PyYAML (apt-get install python3-yaml)")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
API_VERSIONS = {
    "Deployment": "apps/v1",
    "Service": "v1",
    "Job": "batch/v1",
    "PersistentVolumeClaim": "v1",
}
BINARIES = {
    "qbench": ("QBENCH", "target/release/qbench"),
    "qbench-server": ("QBENCH_SERVER", "target/release/qbench-server"),
}
# What run.sh replaces with the start time.
START_PLACEHOLDER = "__START_AT__"
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
INDEX_REF = "$(JOB_COMPLETION_INDEX)"


class Bad(Exception):
    """A finding: where (file and object), the field, and what is wrong."""

    def __init__(self, where, field, message):
        super().__init__(f"{where}: {field}: {message}")


class Doc:
    def __init__(self, file, obj):
        self.file, self.obj = file, obj
        meta = obj.get("metadata") or {}
        self.kind, self.name = obj.get("kind"), meta.get("name")
        self.where = f"{file}: {self.kind}/{self.name}"

    def field(self, path, default=None):
        """The value at a dotted path; missing is a finding unless there is a default."""
        value = self.obj
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                if default is None:
                    raise Bad(self.where, path, "missing")
                return default
        return value


def load(directory):
    files = sorted(Path(directory).glob("*.yaml"))
    if not files:
        raise Bad(directory, "*.yaml", "no manifests here")
    docs = []
    for f in files:
        try:
            objs = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as e:
            raise Bad(f.name, "YAML", " ".join(str(e).split()))
        for obj in objs:
            if obj is None:
                continue
            if not isinstance(obj, dict):
                raise Bad(f.name, "document", "not a mapping")
            docs.append(Doc(f.name, obj))
    return docs


def quantity(value):
    """A Kubernetes quantity as a number, to compare requests with limits."""
    units = {
        "": 1,
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
    }
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    if not m or m.group(2) not in units:
        return None
    return float(m.group(1)) * units[m.group(2)]


# --- command lines, against the binaries' --help ---------------------------------------

_help_cache = {}


def known_flags(prog, sub):
    """{flag: (long name, takes a value)} from `prog [sub] --help`."""
    key = (prog, sub)
    if key not in _help_cache:
        env, default = BINARIES[prog]
        exe = os.environ.get(env) or str(ROOT / default)
        argv = [exe] + ([sub] if sub else []) + ["--help"]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except OSError as e:
            raise Bad(prog, "--help", f"cannot run {exe} ({e.strerror}); build it or set ${env}")
        if out.returncode != 0:
            raise Bad(prog, "--help", f"`{' '.join(argv)}` failed: {out.stderr.strip()[:200]}")
        flags = {}
        for line in out.stdout.splitlines():
            # Option lines of clap's help: "  -o, --out <FILE>" or "      --insecure".
            m = re.match(r"\s*(?:(-\w),\s+)?(--\w[\w-]*)(\s+<)?", line)
            if m:
                entry = (m.group(2), bool(m.group(3)))
                flags[m.group(2)] = entry
                if m.group(1):
                    flags[m.group(1)] = entry
        _help_cache[key] = flags
    return _help_cache[key]


class Command:
    """A container's command line: program, subcommand, options by long name, positionals."""

    def __init__(self, where, container):
        argv = (container.get("command") or []) + (container.get("args") or [])
        for i, arg in enumerate(argv):
            if not isinstance(arg, str):
                raise Bad(where, f"command[{i}]", f"{arg!r} is not a string (quote it)")
        if not argv:
            raise Bad(where, "command", "missing")
        self.prog = os.path.basename(argv[0])
        if self.prog not in BINARIES:
            raise Bad(where, "command", f"runs {argv[0]}, not qbench or qbench-server")
        rest = argv[1:]
        self.sub = None
        if self.prog == "qbench" and rest and not rest[0].startswith("-"):
            self.sub, rest = rest[0], rest[1:]
        known = known_flags(self.prog, self.sub)
        shown = " ".join(filter(None, [self.prog, self.sub]))
        self.opts, self.positional = {}, []
        i = 0
        while i < len(rest):
            arg = rest[i]
            if arg.startswith("-") and arg != "-":
                name, eq, value = arg.partition("=")
                if name not in known:
                    raise Bad(
                        where, "command", f"{name} is not a flag of `{shown}` (see its --help)"
                    )
                long, takes_value = known[name]
                if takes_value and not eq:
                    if i + 1 >= len(rest):
                        raise Bad(where, "command", f"{name} needs a value")
                    i += 1
                    value = rest[i]
                self.opts[long] = value if takes_value else True
            else:
                self.positional.append(arg)
            i += 1

    def get(self, flag):
        return self.opts.get(flag)


# --- pods --------------------------------------------------------------------------------


def pod_spec(doc):
    return doc.field("spec.template.spec")


def containers(doc):
    spec = pod_spec(doc)
    return (spec.get("initContainers") or []) + (spec.get("containers") or [])


def only_container(doc, prog):
    """The one container of doc running prog, with its parsed command."""
    found = [
        c
        for c in containers(doc)
        if os.path.basename(((c.get("command") or [""]) + [""])[0]) == prog
    ]
    if len(found) != 1:
        raise Bad(
            doc.where,
            "spec.template.spec.containers",
            f"{len(found)} containers run {prog}, expected 1",
        )
    c = found[0]
    return c, Command(f"{doc.where}: container {c.get('name')}", c)


def volume_at(doc, container, path, field):
    """The volume mounted at the directory holding path (or at path itself)."""
    for m in container.get("volumeMounts") or []:
        mount = m.get("mountPath", "").rstrip("/")
        if path.rstrip("/") == mount or path.startswith(mount + "/"):
            for v in pod_spec(doc).get("volumes") or []:
                if v.get("name") == m.get("name"):
                    return v
            raise Bad(doc.where, "spec.template.spec.volumes", f"no volume named {m.get('name')}")
    raise Bad(
        doc.where,
        field,
        f"{path} is not on any volume mounted in container {container.get('name')}",
    )


def claim_at(doc, container, path, field, pvc):
    volume = volume_at(doc, container, path, field)
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if claim != pvc.name:
        raise Bad(
            doc.where, field, f"{path} is on volume {volume.get('name')}, not on the PVC {pvc.name}"
        )


def guaranteed(doc, container):
    """requests == limits for CPU and memory: Guaranteed QoS, so the CPU budget is fixed."""
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    for r in ("cpu", "memory"):
        field = f"container {container.get('name')}: resources.limits.{r}"
        if r not in limits:
            raise Bad(doc.where, field, "missing (Guaranteed QoS needs requests == limits)")
        if r in requests and quantity(requests[r]) != quantity(limits[r]):
            raise Bad(
                doc.where,
                field,
                f"{limits[r]}, but requests.{r} is {requests[r]} (Guaranteed QoS needs them equal)",
            )


def port_of(container, ref, protocol):
    """The containerPort a Service targetPort or probe port (number or name) stands for."""
    for p in container.get("ports") or []:
        if p.get("protocol", "TCP") == protocol and ref in (p.get("name"), p.get("containerPort")):
            return p.get("containerPort")
    return None


# --- the checks ----------------------------------------------------------------------------


def check_server(deploy):
    if deploy.field("spec.replicas", 1) != 1:
        raise Bad(
            deploy.where, "spec.replicas", "one server, or the clients are split between servers"
        )
    c, cmd = only_container(deploy, "qbench-server")
    where = f"{deploy.where}: container {c.get('name')}"
    listen = cmd.get("--listen") or "127.0.0.1:4433"
    host, _, port = listen.rpartition(":")
    if host.strip("[]") in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
        raise Bad(
            where, "command --listen", f"{listen}: other pods cannot reach a loopback address"
        )
    port = int(port)
    protocols = {
        p.get("protocol", "TCP") for p in c.get("ports") or [] if p.get("containerPort") == port
    }
    if protocols != {"TCP", "UDP"}:
        raise Bad(
            where,
            "ports",
            f"port {port} is declared for {sorted(protocols) or 'nothing'}, "
            "not TCP (h1/h2) and UDP (h3)",
        )
    if bool(cmd.get("--cert")) != bool(cmd.get("--key")):
        raise Bad(where, "command", "--cert and --key go together")
    for flag in ("--cert", "--key"):
        if cmd.get(flag):
            volume_at(deploy, c, cmd.get(flag), f"command {flag}")
    probe = (c.get("readinessProbe") or {}).get("tcpSocket")
    if not probe or port_of(c, probe.get("port"), "TCP") != port:
        raise Bad(where, "readinessProbe.tcpSocket", f"missing, or not on TCP port {port}")
    guaranteed(deploy, c)
    return c, cmd, port


def check_service(svc, deploy, server, port):
    selector = svc.field("spec.selector")
    labels = deploy.field("spec.template.metadata.labels")
    if any(labels.get(k) != v for k, v in selector.items()):
        raise Bad(
            svc.where, "spec.selector", f"{selector} does not select the pods of {deploy.where}"
        )
    ports = svc.field("spec.ports")
    names = [p.get("name") for p in ports]
    if None in names or len(set(names)) != len(names):
        raise Bad(
            svc.where, "spec.ports", "a Service with several ports needs a distinct name for each"
        )
    by_number = {}
    for p in ports:
        by_number.setdefault(p.get("port"), {})[p.get("protocol", "TCP")] = p
    dual = [n for n, protos in by_number.items() if {"TCP", "UDP"} <= set(protos)]
    if not dual:
        found = ", ".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports)
        raise Bad(
            svc.where,
            "spec.ports",
            f"no port number is served over both TCP and UDP (found {found})",
        )
    number = dual[0]
    for protocol, p in by_number[number].items():
        target = p.get("targetPort", p.get("port"))
        if port_of(server, target, protocol) != port:
            raise Bad(
                svc.where,
                f"spec.ports {p.get('name')}.targetPort",
                f"{target}/{protocol} is not the server's port {port}/{protocol}",
            )
    return number


def check_clients(job, svc, svc_port, pvc, server_cmd):
    if job.field("spec.completionMode", "NonIndexed") != "Indexed":
        raise Bad(
            job.where,
            "spec.completionMode",
            "must be Indexed: each pod takes its shard from JOB_COMPLETION_INDEX",
        )
    completions = job.field("spec.completions")
    parallelism = job.field("spec.parallelism", 1)
    if parallelism != completions:
        raise Bad(
            job.where,
            "spec.parallelism",
            f"{parallelism}, but spec.completions is {completions}: all shards must run at once",
        )
    if job.field("spec.backoffLimit", 6) != 0:
        raise Bad(
            job.where,
            "spec.backoffLimit",
            "must be 0: a retried shard starts after the barrier, alone",
        )
    if pod_spec(job).get("restartPolicy") != "Never":
        raise Bad(
            job.where,
            "spec.template.spec.restartPolicy",
            "must be Never: a restarted shard starts after the barrier",
        )
    anti = (pod_spec(job).get("affinity") or {}).get("podAntiAffinity") or {}
    if not anti.get("preferredDuringSchedulingIgnoredDuringExecution") or anti.get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ):
        raise Bad(
            job.where,
            "spec.template.spec.affinity.podAntiAffinity",
            "spread the clients with a preferred (not required) rule",
        )

    c, cmd = only_container(job, "qbench")
    where = f"{job.where}: container {c.get('name')}"
    if cmd.sub is not None:
        raise Bad(where, "command", f"runs `qbench {cmd.sub}`, not a load")
    m = re.fullmatch(r"auto/(\d+)", cmd.get("--shard") or "")
    if not m:
        raise Bad(
            where,
            "command --shard",
            f"{cmd.get('--shard')}: must be auto/N, every pod runs the same command",
        )
    n = int(m.group(1))
    if n != completions:
        raise Bad(where, "command --shard", f"auto/{n}, but spec.completions is {completions}")
    connections = int(cmd.get("--connections") or 1)
    if connections < n:
        raise Bad(
            where, "command --connections", f"{connections}: each of {n} shards needs at least one"
        )
    start = cmd.get("--start-at")
    if start is None:
        raise Bad(
            where, "command --start-at", "missing: the shards would start whenever their pods do"
        )
    if start != START_PLACEHOLDER and not RFC3339.fullmatch(start):
        raise Bad(
            where,
            "command --start-at",
            f"{start}: must be an RFC 3339 time (or {START_PLACEHOLDER} for run.sh); "
            "+DELAY would count from each pod's own start",
        )
    report = cmd.get("--json")
    if not report or report == "-":
        raise Bad(where, "command --json", f"{report}: must be a file on the reports volume")
    if INDEX_REF not in report:
        raise Bad(
            where,
            "command --json",
            f"{report}: must contain {INDEX_REF}, or the shards overwrite one another",
        )
    claim_at(job, c, report, "command --json", pvc)
    target = cmd.get("--target") or ""
    m = re.fullmatch(r"https://([^/:]+):(\d+)/?", target)
    if not m or m.group(1).split(".")[0] != svc.name or int(m.group(2)) != svc_port:
        raise Bad(
            where,
            "command --target",
            f"{target}: must be https://{svc.name}:{svc_port}, the Service",
        )
    if cmd.get("--ca"):
        volume_at(job, c, cmd.get("--ca"), "command --ca")
    elif not cmd.get("--insecure") and server_cmd.get("--cert"):
        raise Bad(where, "command", "give --ca (the server's certificate) or --insecure")
    guaranteed(job, c)
    return n, report


def check_merge(job, pvc, report):
    c, cmd = only_container(job, "qbench")
    where = f"{job.where}: container {c.get('name')}"
    if cmd.sub != "merge":
        raise Bad(where, "command", "must run `qbench merge`")
    out = cmd.get("--out")
    if not out or out == "-":
        raise Bad(where, "command --out", f"{out}: must be a file on the reports volume")
    claim_at(job, c, out, "command --out", pvc)
    if not cmd.positional:
        raise Bad(where, "command", "names no reports to merge")
    shards_dir = os.path.dirname(report)
    for p in cmd.positional:
        claim_at(job, c, p, "command", pvc)
    if not any(p.rstrip("/") == shards_dir or p == report for p in cmd.positional):
        raise Bad(
            where, "command", f"merges {cmd.positional}, not {shards_dir}/ where the clients write"
        )


def check(directory):
    docs = load(directory)
    for d in docs:
        if d.kind not in API_VERSIONS:
            raise Bad(d.where, "kind", f"unexpected (expected one of {', '.join(API_VERSIONS)})")
        if d.obj.get("apiVersion") != API_VERSIONS[d.kind]:
            raise Bad(
                d.where, "apiVersion", f"{d.obj.get('apiVersion')}, expected {API_VERSIONS[d.kind]}"
            )
        if not d.name:
            raise Bad(d.where, "metadata.name", "missing")

    def one(kind):
        found = [d for d in docs if d.kind == kind]
        if len(found) != 1:
            raise Bad(
                ", ".join(sorted({d.file for d in docs})), kind, f"{len(found)} found, expected 1"
            )
        return found[0]

    deploy, svc, pvc = one("Deployment"), one("Service"), one("PersistentVolumeClaim")
    jobs = [d for d in docs if d.kind == "Job"]
    job_files = ", ".join(j.file for j in jobs) or directory
    if len(jobs) != 2:
        raise Bad(job_files, "Job", f"{len(jobs)} found, expected 2 (clients and merge)")
    merges = [j for j in jobs if only_container(j, "qbench")[1].sub == "merge"]
    if len(merges) != 1:
        raise Bad(job_files, "Job", f"{len(merges)} Jobs run `qbench merge`, expected 1")
    merge = merges[0]
    clients = next(j for j in jobs if j is not merge)

    # One image for all, so server, clients and merge are the same build.
    image = containers(clients)[0].get("image")
    for d in (deploy, *jobs):
        for c in containers(d):
            if c.get("image") != image:
                raise Bad(
                    d.where,
                    f"container {c.get('name')}: image",
                    f"{c.get('image')}, but {clients.where} uses {image}",
                )
    if "ReadWriteMany" not in pvc.field("spec.accessModes"):
        raise Bad(
            pvc.where,
            "spec.accessModes",
            "must include ReadWriteMany: all client pods write to it at once",
        )

    server, server_cmd, port = check_server(deploy)
    svc_port = check_service(svc, deploy, server, port)
    n, report = check_clients(clients, svc, svc_port, pvc, server_cmd)
    check_merge(merge, pvc, report)
    return f"{len(docs)} objects, {n} shards, port {svc_port} TCP+UDP, image {image}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dir", default=str(HERE), help="directory of the *.yaml manifests (default: this one)"
    )
    ap.add_argument(
        "--self-test", action="store_true", help="check that broken copies of them are rejected"
    )
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="with --self-test, show each rejection"
    )
    args = ap.parse_args()
    try:
        if args.self_test:
            from check_selftest import self_test  # the broken variants live beside this file

            print(f"check.py: self-test OK: {self_test(args.dir, args.verbose)}")
        else:
            print(f"check.py: OK {args.dir}: {check(args.dir)}")
    except Bad as e:
        print(f"check.py: FAIL {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
