"""Broken variants of the manifests, each of which check.py must reject (`check.py --self-test`)."""

import copy
import tempfile
from pathlib import Path

import yaml

from check import Bad, Doc, check, load


def _spec(docs, kind, name=None):
    return next(d.obj for d in docs if d.kind == kind and name in (None, d.name))["spec"]


def _container(docs, name):
    """The first container of the Deployment or Job called name."""
    kind = "Deployment" if name == "qbench-server" else "Job"
    return _spec(docs, kind, name)["template"]["spec"]["containers"][0]


def _set_arg(docs, name, flag, value):
    """Gives flag another value in name's command line (None: drops it)."""
    cmd = _container(docs, name)["command"]
    i = cmd.index(flag)
    cmd[i : i + 2] = [] if value is None else [flag, value]


def _set_last_arg(docs, name, value):
    _container(docs, name)["command"][-1] = value


def _drop_udp(ports):
    ports[:] = [p for p in ports if p.get("protocol") != "UDP"]


C, S, M = "qbench-clients", "qbench-server", "qbench-merge"

# (what is broken, how, a word the rejection must contain)
BROKEN = [
    ("parallelism != completions", lambda d: _spec(d, "Job", C).update(parallelism=3), "parallel"),
    (
        "completions != N of --shard",
        lambda d: _spec(d, "Job", C).update(completions=5, parallelism=5),
        "--shard",
    ),
    ("not an Indexed Job", lambda d: _spec(d, "Job", C).pop("completionMode"), "completionMode"),
    ("retries allowed", lambda d: _spec(d, "Job", C).update(backoffLimit=3), "backoffLimit"),
    ("fixed shard index", lambda d: _set_arg(d, C, "--shard", "0/4"), "--shard"),
    ("no --start-at", lambda d: _set_arg(d, C, "--start-at", None), "--start-at"),
    ("relative --start-at", lambda d: _set_arg(d, C, "--start-at", "+60s"), "--start-at"),
    (
        "report off the volume",
        lambda d: _set_arg(d, C, "--json", "/tmp/s-$(JOB_COMPLETION_INDEX).json"),
        "not on any volume",
    ),
    ("one report for all shards", lambda d: _set_arg(d, C, "--json", "/reports/s.json"), "--json"),
    ("fewer connections than shards", lambda d: _set_arg(d, C, "--connections", "2"), "--conn"),
    ("target not the Service", lambda d: _set_arg(d, C, "--target", "https://x:4433"), "--target"),
    ("number not quoted", lambda d: _set_arg(d, C, "--connections", 64), "command["),
    ("unknown client flag", lambda d: _container(d, C)["command"].append("--shards"), "--shards"),
    ("unknown server flag", lambda d: _container(d, S)["command"].append("--tls"), "--tls"),
    ("server on loopback", lambda d: _set_arg(d, S, "--listen", "127.0.0.1:4433"), "--listen"),
    ("server container without UDP", lambda d: _drop_udp(_container(d, S)["ports"]), "UDP"),
    ("no readiness probe", lambda d: _container(d, S).pop("readinessProbe"), "readinessProbe"),
    (
        "CPU limit above request",
        lambda d: _container(d, S)["resources"]["limits"].update(cpu="8"),
        "resources.limits.cpu",
    ),
    ("Service without UDP", lambda d: _drop_udp(_spec(d, "Service")["ports"]), "TCP and UDP"),
    (
        "UDP on another port number",
        lambda d: _spec(d, "Service")["ports"][1].update(port=4434),
        "TCP and UDP",
    ),
    (
        "Service selects nothing",
        lambda d: _spec(d, "Service").update(selector={"app": "other"}),
        "spec.selector",
    ),
    (
        "PVC not ReadWriteMany",
        lambda d: _spec(d, "PersistentVolumeClaim").update(accessModes=["ReadWriteOnce"]),
        "ReadWriteMany",
    ),
    ("merge does not merge", lambda d: _container(d, M).update(command=["qbench"]), "merge"),
    ("merge reads another volume", lambda d: _set_last_arg(d, M, "/data/"), "/data/"),
    ("merge reads a subdirectory", lambda d: _set_last_arg(d, M, "/reports/old/"), "not /reports/"),
    (
        "merge on another claim",
        lambda d: _spec(d, "Job", M)["template"]["spec"]["volumes"][0][
            "persistentVolumeClaim"
        ].update(claimName="other"),
        "not on the PVC",
    ),
    ("two images", lambda d: _container(d, S).update(image="qbench:other"), "image"),
    (
        "old Job API",
        lambda d: next(x.obj for x in d if x.name == M).update(apiVersion="batch/v1beta1"),
        "apiVersion",
    ),
    (
        "Deployment in extensions",
        lambda d: next(x.obj for x in d if x.name == S).update(apiVersion="extensions/v1beta1"),
        "apiVersion",
    ),
]


def self_test(directory, verbose):
    original = load(directory)
    with tempfile.TemporaryDirectory(prefix="qbench-k8s-check.") as tmp:

        def write(docs):
            for f in {d.file for d in original}:
                text = yaml.safe_dump_all([d.obj for d in docs if d.file == f], sort_keys=False)
                (Path(tmp) / f).write_text(text)

        # The copy as it is must pass, or every rejection below proves nothing.
        write(original)
        check(tmp)
        for what, breaks, expect in BROKEN:
            docs = [Doc(d.file, copy.deepcopy(d.obj)) for d in original]
            breaks(docs)
            write(docs)
            try:
                check(tmp)
            except Bad as e:
                if expect not in str(e):
                    raise Bad("self-test", what, f"rejected for another reason: {e}")
                if verbose:
                    print(f"  {what}: {e}")
                continue
            raise Bad("self-test", what, "accepted")
    return f"{len(BROKEN)} broken variants of {directory} each rejected"
