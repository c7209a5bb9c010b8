"""``_beam.cache_pickle_compression``: Beam's pickler compresses and decompresses the same bytes
once in a process that runs our pipelines; the bytes it makes and reads are bz2's own, and what
it keeps is bounded."""
import subprocess
import sys
import textwrap


def _child(code: str) -> str:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=True, timeout=300).stdout.strip()


def test_a_pipeline_run_remembers_bz2s_answers_and_they_are_bz2s():
    out = _child("""
        import bz2, os
        from apache_beam.internal import cloudpickle_pickler as cp, pickler
        from fair_forge_beam import _beam
        from fair_forge_beam._beam import beam
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

        fn = beam.Map(lambda x, k=3: x + k)
        before = pickler.dumps(fn)
        with run_pipeline(pipeline_options([])) as p:
            got = p | beam.Create([1, 2]) | beam.Map(lambda x: x * 2)
            beam.testing.util.assert_that(got, beam.testing.util.equal_to([2, 4]))
        memo = cp.bz2
        print(type(memo).__name__, memo.BZ2Decompressor is bz2.BZ2Decompressor)
        print(pickler.dumps(fn) == before, pickler.loads(before).label == fn.label)

        calls = []
        real_c, real_d = bz2.compress, bz2.decompress
        bz2.compress = lambda *a: calls.append("c") or real_c(*a)
        bz2.decompress = lambda *a: calls.append("d") or real_d(*a)
        data = [os.urandom(50) * 40, b"", bytes(range(256)) * 7]
        packed = [memo.compress(d, 9) for d in data] + [memo.compress(d, 9) for d in data]
        unpacked = [memo.decompress(c) for c in packed]
        print(packed[:3] == packed[3:] == [real_c(d, 9) for d in data], unpacked == data + data)
        print("".join(calls))  # each distinct input once
        bz2.compress, bz2.decompress = real_c, real_d

        small = _beam._MemoBz2(bz2, 16 * 1024)
        for i in range(200):
            small.compress(os.urandom(100) * 5, 9)
        big = os.urandom(2000)
        small.compress(big, 9)
        print(small._held <= 16 * 1024, ("c", 9, big) in small._memo)
        with run_pipeline(pipeline_options([])) as p:  # installed once: not wrapped twice
            _ = p | beam.Create([1])
        print(cp.bz2 is memo)
    """.replace("beam.testing.util", "__import__('apache_beam.testing.util').testing.util"))
    assert out.splitlines() == ["_MemoBz2 True", "True True", "True True", "cccddd", "True False", "True"]
