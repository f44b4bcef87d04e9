"""vramtrace's boot shim: the folder holding this file goes on PYTHONPATH
(`vramtrace run` puts it there), so that Python's `site` imports it at start.

It promises three things. The program's own `sitecustomize` (the next one on
sys.path), if it has one, runs as it would without vramtrace, and its module
is the one `import sitecustomize` gives. This folder is taken off sys.path
again, so the program sees the path it would have had. And nothing else is
done until the program imports torch: one finder sits first on
sys.meta_path, answers no for every other name, and leaves the moment torch
is asked for; then, once torch has finished importing, the companion
(vramtrace_torch, the folder above) is loaded from its file. A failure of the
companion is kept from the program.
"""
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _is_here(entry):
    try:
        return _os.path.abspath(entry or _os.curdir) == _HERE
    except Exception:
        return False


def _start_companion(torch_module):
    """Load vramtrace_torch from the folder above this one (without putting
    it on sys.path) and let it attach to torch."""
    try:
        import importlib.util
        pkg = _os.path.join(_os.path.dirname(_HERE), "__init__.py")
        spec = importlib.util.spec_from_file_location(
            "vramtrace_torch", pkg, submodule_search_locations=[_os.path.dirname(_HERE)])
        mod = importlib.util.module_from_spec(spec)
        _sys.modules["vramtrace_torch"] = mod
        spec.loader.exec_module(mod)
        mod.attach(torch_module)
    except Exception:
        pass


class _TorchFinder:
    """Asked first for every import until torch's: None for any other name.
    For torch it steps aside, finds torch's own spec and has its loader call
    the companion once torch's module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            _sys.meta_path.remove(self)
        except ValueError:
            return None
        try:
            import importlib.util
            spec = importlib.util.find_spec("torch")
        except Exception:
            return None
        loader = getattr(spec, "loader", None) if spec else None
        real = getattr(loader, "exec_module", None)
        if real is None:
            return spec

        def exec_module(module):
            try:
                del loader.exec_module   # the loader is as it was
            except Exception:
                pass
            real(module)
            _start_companion(module)

        try:
            loader.exec_module = exec_module
        except Exception:
            pass
        return spec


def _run_users_sitecustomize():
    """Import the next sitecustomize on sys.path in this module's place; put
    this one back when there is none. An error in the program's own is
    raised as it would be without vramtrace (site prints it)."""
    me = _sys.modules.pop("sitecustomize", None)
    saved = list(_sys.path)
    _sys.path[:] = [p for p in saved if not _is_here(p)]
    found = False
    try:
        import sitecustomize  # noqa: F401  (the program's own)
        found = True
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
    finally:
        if not found and me is not None:
            _sys.modules["sitecustomize"] = me


_sys.meta_path.insert(0, _TorchFinder())
_run_users_sitecustomize()
