"""glibc's mmap threshold in a process that runs our pipelines (``_beam.tune_malloc``): fixed once in
the command's process, the launcher and every SDK worker that runs our heavy DoFns, so that the
data plane's large buffers are unmapped when freed instead of leaving holes in the heaps (issue 26)."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import fair_forge_beam._beam as fb

glibc = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"), reason="glibc's allocator only")


def _child(code: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=True, timeout=300, env={**environ, **env}).stdout.strip()


#: a process that frees one buffer of 16 MiB (as a worker frees a data-plane message), then holds
#: 40 buffers of 1 MiB: how much glibc's heaps grew for them (MB), and what tune_malloc returned
HEAP_GROWTH = """
    import ctypes, sys
    class MI(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MI
    tuned = None
    if sys.argv[1] == "tuned":
        from fair_forge_beam._malloc import tune_malloc
        tuned = tune_malloc()
    big = bytearray(16 << 20)
    del big  # glibc's own rule: the threshold rises to this block's size
    before = libc.mallinfo2().arena
    held = [bytearray(1 << 20) for _ in range(40)]
    print(tuned, (libc.mallinfo2().arena - before) >> 20)
"""


@glibc
def test_after_tune_malloc_large_buffers_stay_out_of_the_heap():
    untuned = _child(HEAP_GROWTH.replace("sys.argv[1]", '"plain"'))
    tuned = _child(HEAP_GROWTH.replace("sys.argv[1]", '"tuned"'))
    assert untuned.split()[0] == "None" and int(untuned.split()[1]) >= 35  # glibc's default: cut out of the heap
    assert tuned.split()[0] == "True" and int(tuned.split()[1]) < 5  # mapped each, unmapped when freed


#: page faults of 500 rounds of two temporary buffers of 200 KiB (below the mmap threshold, so from the
#: heap's top), allocated and freed in a process that called tune_malloc first, as a command does
TOP_CHURN = """
    import resource
    from fair_forge_beam._malloc import tune_malloc
    tuned = tune_malloc()
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    before = faults()
    for _ in range(500):
        a = bytearray(200 << 10)
        b = bytearray(200 << 10)
        del b, a
    print(tuned, faults() - before)
"""


@glibc
def test_after_tune_malloc_the_heaps_top_is_not_given_back_and_faulted_in_again_per_buffer():
    """Setting the mmap threshold stops glibc's own raising of the trimming threshold: left at its
    initial 128 KiB, every round returned the top and faulted 400 KiB in again (about 100 faults)."""
    tuned, faults = _child(TOP_CHURN).split()
    assert tuned == "True" and int(faults) < 2_000
    # a trimming threshold the user set is kept: then the heap's top goes back every round
    tuned, faults = _child(TOP_CHURN, MALLOC_TRIM_THRESHOLD_="131072").split()
    assert tuned == "True" and int(faults) > 20_000


@glibc
def test_a_threshold_the_user_set_is_kept():
    out = _child("""
        from fair_forge_beam._malloc import tune_malloc
        print(tune_malloc())
    """, MALLOC_MMAP_THRESHOLD_="65536")
    assert out == "False"


@glibc
def test_a_pipeline_run_tunes_the_launcher_and_a_command_before_its_imports():
    out = _child("""
        from fair_forge_beam import _malloc
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
        before = _malloc._done
        with run_pipeline(pipeline_options([])) as p:
            _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x)
        print(before, _malloc._done)
    """)
    assert out == "False True"
    out = _child("""
        import sys
        sys.argv = ["fair-forge-beam", "--output", "/nonexistent/out"]
        from fair_forge_beam import _malloc
        from fair_forge_beam.console import starting
        starting()
        print(_malloc._done, "apache_beam" in sys.modules)
    """)
    assert out == "True False"


def test_the_read_stage_tunes_its_worker(monkeypatch):
    """The read stage moves the data through a worker first; the other heavy DoFns: test_gc_tuning."""
    from fair_forge_beam.io.read import _ParseRecord

    calls = []
    monkeypatch.setattr(fb, "tune_malloc", lambda: calls.append(1))
    _ParseRecord().setup()
    assert calls == [1]
