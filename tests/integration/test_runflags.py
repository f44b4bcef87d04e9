"""`vramtrace run`'s flags are the options table's (common/options.def):
each flag as the table writes it, and nothing else."""
from run_tests import *


def run_env(*flags):
    """`vramtrace run FLAGS -- env` without PyTorch's settings in the
    environment: its status, the PYTORCH_* lines it printed, its stderr."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_")}
    p = subprocess.run([CLI, "run", *flags, "--", "env"], capture_output=True, text=True, env=e, timeout=60)
    return p.returncode, sorted(l for l in p.stdout.splitlines() if l.startswith("PYTORCH_")), p.stderr


@test
def runflags_tensors_flag_as_the_table_writes_it():
    eq(run_env("--tensors"), (0, ["PYTORCH_ALLOC_CONF=backend:cudaMallocAsync",
                                  "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"], ""), "--tensors")
    eq(run_env("--tensors=nocache"), (0, ["PYTORCH_NO_CUDA_MEMORY_CACHING=1"], ""), "--tensors=nocache")
    for flag in ("--tensors=other", "--tensors[=nocache]", "--tensors="):
        eq(run_env(flag), (2, [], f"vramtrace run: unknown option {flag} (see vramtrace --help)\n"),
           f"{flag} is no flag of the table's")
