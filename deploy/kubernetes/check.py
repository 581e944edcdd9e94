#!/usr/bin/env python3
"""Consistency of the manifests beyond their schemas (scripts/test.sh).

kubernetes-validate checks every built-in kind against the pinned
Kubernetes version's schemas; it has no schema for the Prometheus
Operator's PodMonitor (a CRD), so this checks what would break the
PodMonitor silently: its apiVersion and kind, that its selector matches
the pods of the Job and the StatefulSet, and that the port it scrapes is a
named container port of theirs. It also checks that the N of every
`--shard auto/N` equals the Job's completions and parallelism and the
StatefulSet's replicas, and that the StatefulSet passes the pod ordinal
as JOB_COMPLETION_INDEX.
"""

import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def docs(name):
    with open(os.path.join(HERE, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def fail(msg):
    print("deploy/kubernetes: " + msg, file=sys.stderr)
    sys.exit(1)


def shard_count(container):
    args = container.get("args", [])
    if "--shard" not in args:
        fail("%s: no --shard in args" % container["name"])
    value = args[args.index("--shard") + 1]
    index, _, n = value.partition("/")
    if index != "auto":
        fail("--shard %s: the manifests take the index from the pod (auto/N)" % value)
    return int(n)


def main():
    (job,) = docs("job.yaml")
    sts = next(d for d in docs("statefulset.yaml") if d["kind"] == "StatefulSet")
    (pm,) = docs("podmonitor.yaml")
    if (pm.get("apiVersion"), pm.get("kind")) != ("monitoring.coreos.com/v1", "PodMonitor"):
        fail("podmonitor.yaml is not a monitoring.coreos.com/v1 PodMonitor")
    spec = pm["spec"]
    unknown = set(spec) - {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel", "podTargetLabels"}
    if unknown:
        fail("PodMonitor spec has fields this check does not know: %s" % sorted(unknown))
    want = spec["selector"]["matchLabels"]
    ports = [e["port"] for e in spec["podMetricsEndpoints"]]
    for workload in (job, sts):
        what = "%s %s" % (workload["kind"], workload["metadata"]["name"])
        pod = workload["spec"]["template"]
        labels = pod["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in want.items()):
            fail("the PodMonitor's selector %s does not match the pods of %s (%s)" % (want, what, labels))
        if workload["metadata"]["namespace"] != pm["metadata"]["namespace"]:
            fail("%s is not in the PodMonitor's namespace" % what)
        (container,) = pod["spec"]["containers"]
        named = {p.get("name") for p in container.get("ports", [])}
        for p in ports:
            if p not in named:
                fail("the PodMonitor scrapes port %r, which %s does not name" % (p, what))
        n = shard_count(container)
        counts = (
            [workload["spec"]["completions"], workload["spec"]["parallelism"]]
            if workload["kind"] == "Job"
            else [workload["spec"]["replicas"]]
        )
        if any(c != n for c in counts):
            fail("%s runs %s pods for --shard auto/%d; they must be equal" % (what, counts, n))
    if job["spec"].get("completionMode") != "Indexed":
        fail("the Job must be Indexed: its pods take their shard from JOB_COMPLETION_INDEX")
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    ref = env.get("JOB_COMPLETION_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    if ref != "metadata.labels['apps.kubernetes.io/pod-index']":
        fail("the StatefulSet must pass the pod ordinal as JOB_COMPLETION_INDEX")
    print("deploy/kubernetes: PodMonitor selects the Job's and the StatefulSet's pods on port %s; shard counts agree" % ports)


main()
