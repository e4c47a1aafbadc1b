#!/usr/bin/env bash
# Static checks of the deploy recipes, no cluster needed: bash -n and shellcheck (where installed)
# on every script, and the Kubernetes manifests parsed (PyYAML where installed) and checked for what
# the recipe relies on: an Indexed Job with completions = parallelism = SHARDS, one nvidia.com/gpu
# per pod, JOB_COMPLETION_INDEX as the shard, and the same claim and RUN_ID in the merge Job.
# deploy/local_array.sh runs the Slurm scripts themselves end to end.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts=(deploy/package.sh deploy/local_array.sh deploy/check.sh deploy/slurm/submit.sh
         deploy/slurm/campaign.sbatch deploy/slurm/merge.sbatch)
[ -f .clusterfuzzlite/build.sh ] && scripts+=(.clusterfuzzlite/build.sh)
for s in "${scripts[@]}"; do bash -n "$s"; done
echo "check: bash -n: ${#scripts[@]} scripts"
if command -v shellcheck >/dev/null; then
  shellcheck -s bash "${scripts[@]}"
  echo "check: shellcheck: clean"
else
  echo "check: shellcheck not installed; skipped"
fi
pod_script=$(mktemp)
trap 'rm -f "$pod_script"' EXIT
python3 - deploy/k8s/campaign-job.yaml deploy/k8s/merge-job.yaml "$pod_script" <<'EOF'
import sys
try:
    import yaml
except ImportError:
    print("check: PyYAML not installed; the manifests were not parsed")
    sys.exit(0)
campaign = list(yaml.safe_load_all(open(sys.argv[1])))
merge = list(yaml.safe_load_all(open(sys.argv[2])))
def fail(msg):
    sys.exit("check: FAIL: " + msg)
kinds = {d["kind"]: d for d in campaign}
if set(kinds) != {"PersistentVolumeClaim", "Job"}: fail(f"campaign-job.yaml holds {sorted(kinds)}")
job = kinds["Job"]
spec = job["spec"]
pod = spec["template"]["spec"]
if spec.get("completionMode") != "Indexed": fail("the campaign Job is not Indexed")
(c,) = pod["containers"]
env = {e["name"]: e.get("value") for e in c["env"]}
n = spec["completions"]
if not (n == spec["parallelism"] == int(env["SHARDS"])):
    fail(f"completions {n}, parallelism {spec['parallelism']} and SHARDS {env['SHARDS']} differ")
if c["resources"]["limits"].get("nvidia.com/gpu") != 1: fail("a campaign pod does not ask for one GPU")
script = c["args"][0]
if '--shard "$JOB_COMPLETION_INDEX/$SHARDS"' not in script: fail("the shard is not JOB_COMPLETION_INDEX/SHARDS")
if pod["restartPolicy"] != "Never": fail("restartPolicy is not Never")
claim = kinds["PersistentVolumeClaim"]["metadata"]["name"]
def claims(p): return {v["persistentVolumeClaim"]["claimName"] for v in p["volumes"] if "persistentVolumeClaim" in v}
(mjob,) = merge
mpod = mjob["spec"]["template"]["spec"]
if claims(pod) != {claim} or claims(mpod) != {claim}: fail(f"the Jobs do not both mount the claim {claim}")
(mc,) = mpod["containers"]
menv = {e["name"]: e.get("value") for e in mc["env"]}
if menv["RUN_ID"] != env["RUN_ID"]: fail("RUN_ID differs between the campaign and the merge")
if "nvidia.com/gpu" in mc["resources"].get("limits", {}): fail("the merge asks for a GPU")
if "merge.sbatch" not in mc["args"][0]: fail("the merge Job does not run merge.sbatch")
open(sys.argv[3], "w").write("#!/usr/bin/env bash\n" + script)
print(f"check: k8s manifests: Indexed Job of {n} shards, 1 GPU each, claim {claim}, RUN_ID {env['RUN_ID']}; merge Job ok")
EOF
# The campaign pod's script (JOB_COMPLETION_INDEX and the env entries come from Kubernetes).
if [ -s "$pod_script" ]; then
  bash -n "$pod_script"
  if command -v shellcheck >/dev/null; then shellcheck -s bash -e SC2154 "$pod_script"; fi
  echo "check: the campaign pod's script: bash -n and shellcheck (where installed) clean"
fi
