#!/usr/bin/env python3
"""Validates deploy/kubernetes/*.yaml offline with the Kubernetes Python client's models.

Each document is read into its model (V1Job, V1PersistentVolumeClaim, ...; a missing
required field raises) and written back: a key the model does not know, or a value of
the wrong type, would not survive the round trip, so the two must be equal. Then the
Indexed Job's segment count must agree with its --segment I/N.
Usage: validate_k8s.py FILE... ; prints `valid N documents`.
"""

import re
import subprocess
import sys

import yaml
from kubernetes import client


def model_of(doc):
    version = doc["apiVersion"].split("/")[-1]
    return f"{version.capitalize()}{doc['kind']}"


def main():
    api = client.ApiClient()
    docs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            docs += [(path, d) for d in yaml.safe_load_all(f) if d]
    for path, doc in docs:
        try:
            obj = api._ApiClient__deserialize(doc, model_of(doc))
        except Exception as e:
            sys.exit(f"{path}: {doc.get('kind')} is not valid: {e}")
        back = api.sanitize_for_serialization(obj)
        if back != doc:
            sys.exit(f"{path}: {doc['kind']} {doc['metadata']['name']} does not round-trip: unknown key or wrong type\n{back}")
        if doc["kind"] == "Job" and doc["spec"].get("completionMode") == "Indexed":
            spec = doc["spec"]
            args = " ".join(spec["template"]["spec"]["containers"][0]["args"])
            n = re.search(r'--segment "\$\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)/(\d+)"', args)
            if not n:
                sys.exit(f"{path}: the Indexed Job does not run --segment $((JOB_COMPLETION_INDEX + 1))/N")
            n = int(n.group(1))
            if not spec["completions"] == spec["parallelism"] == n:
                sys.exit(f"{path}: completions {spec['completions']}, parallelism {spec['parallelism']} and --segment .../{n} differ")
            # The shell of the last pod (index N-1), after Kubernetes turned `$$` into
            # `$`, runs segment N/N: shown by echo instead of loadlens.
            line = args.replace("$$", "$").replace("exec loadlens", "exec echo loadlens", 1)
            env = {"JOB_COMPLETION_INDEX": str(n - 1), "URL": "http://x/", "START_AT": "1"}
            out = subprocess.run(["sh", "-c", line], env=env, capture_output=True, text=True).stdout
            if f"--segment {n}/{n} " not in out or f"segment-{n}.json" not in out:
                sys.exit(f"{path}: pod {n - 1} would run: {out}")
    print(f"valid {len(docs)} documents")


if __name__ == "__main__":
    main()
