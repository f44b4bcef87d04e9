"""The calling thread's Python frames for every CPython layout vramtrace
knows (3.10 to 3.13), on fake objects: each version's walk is checked on
every machine, whichever interpreters it has (python_frames_match_the_
interpreter checks the real ones that are installed)."""
from run_tests import *


@test
def pywalk_every_version_on_fake_frames():
    for minor in (10, 11, 12, 13):
        p = subprocess.run([os.path.join(T, "t_pywalk"), str(minor)], capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stdout), (0, f"pywalk 3.{minor}: {127 if minor == 10 else 131} passed, 0 failed\n"),
           f"t_pywalk {minor}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
