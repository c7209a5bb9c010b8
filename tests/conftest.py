"""Shared test fixtures: Beam pipelines on FnApiRunner (named explicitly, no download)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from helpers import CHROMIUM, SHARED, alive, chromium_or_skip, fnapi_pipeline

settings.register_profile("ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


#: the environment variable naming the test session's own temporary folder, set by the process that
#: made it (:func:`pytest_configure`) and inherited by its pytest-xdist workers and every process a test starts
SESSION_TMP_ENV = "FAIR_FORGE_TEST_SESSION_TMP"


def _ctrl_c_at_its_default() -> None:
    """SIGINT at Python's default handler in this test process, so that every process a test starts
    takes a Ctrl-C as from a terminal: a shell's background job (CI's) starts with SIGINT ignored, which
    a child inherits through ``exec`` while a handler is reset to the default there. The tests set it
    so in the child with a ``preexec_fn`` before; that makes ``subprocess`` fork instead of ``vfork``,
    and gRPC's fork handlers (a Beam runner's threads in this process) then wrote
    ``ev_epoll1_linux.cc … epoll_wait error: Bad file descriptor`` into the child's stderr before its
    first line (test_interrupts, once in a loaded full run; the package never uses ``preexec_fn``:
    beam_pipeline). Only the main thread may set it: an xdist worker's and a plain session's both are."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_ctrl_c_at_its_default()


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """Give the test session a temporary folder of its own (``fair-forge-tests-*`` in the system's),
    the ``TMPDIR`` of its processes, removed whole when the session ends (:func:`pytest_unconfigure`).

    Beam's ``Pipeline()`` makes a ``beam-pipeline-temp*`` folder and removes it only in ``run()``: each
    test that builds a graph without running it (a construction error it checks, a graph it inspects)
    left one in /tmp, 264 after one full run; ``tempfile.mkdtemp()`` folders of tests and of the
    processes they start (``beam-temp*`` of a job server, ``tmp*``) are caught the same way. Nothing
    else is touched: not another process's folder in /tmp (another test session, a run of the package),
    which a listing taken at the start could not tell from this session's. Made by the process that
    runs the session (xdist's controller, or the only process with ``-n 0``): its workers inherit
    ``TMPDIR`` and :data:`SESSION_TMP_ENV` and make none of their own, and the controller removes the
    folder after they have ended. pytest's own ``tmp_path`` folders stay where they were
    (``pytest-of-<user>/``, its last three sessions kept): their base is fixed before ``TMPDIR`` changes."""
    import tempfile

    if os.environ.get(SESSION_TMP_ENV):  # an xdist worker, or a pytest a test started: the session's folder
        return
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        factory.getbasetemp()  # xdist gives its workers folders under this one
    root = tempfile.mkdtemp(prefix="fair-forge-tests-")
    config.stash[_SESSION_TMP] = (root, os.environ.get("TMPDIR"), tempfile.tempdir)
    os.environ["TMPDIR"] = os.environ[SESSION_TMP_ENV] = root
    tempfile.tempdir = root


def pytest_unconfigure(config):
    """Remove the session's temporary folder (:func:`pytest_configure`) and restore ``TMPDIR``."""
    import shutil
    import tempfile

    made = config.stash.get(_SESSION_TMP, None)
    if made is None:
        return
    root, tmpdir, cached = made
    del config.stash[_SESSION_TMP]
    os.environ.pop(SESSION_TMP_ENV, None)
    if tmpdir is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = tmpdir
    tempfile.tempdir = cached
    shutil.rmtree(root, ignore_errors=True)


_SESSION_TMP = pytest.StashKey[tuple]()


@pytest.fixture
def test_pipeline():
    """A ``TestPipeline`` on FnApiRunner in-memory (use as a context manager; :func:`helpers.fnapi_pipeline`)."""
    return fnapi_pipeline()


@pytest.fixture(scope="session", autouse=True)
def beam_as_the_package_runs_it():
    """Beam's per-process caches that :func:`fair_forge_beam.beam_pipeline.run_pipeline` installs
    before every run of the package's commands (``_beam.cache_dofn_signatures``,
    ``cache_dofn_specs``, ``cache_dofn_sources``, ``cache_pickle_compression``: the same answers, remembered;
    ``probe_ipython_only_when_imported``: Beam's answer without importing IPython), installed
    once per test process before its first test, so that every pipeline a test builds itself
    (``TestPipeline``, ``beam.Pipeline``) runs as the package's runs do. Before, they were there
    only after the process's first ``run_pipeline``, so a test's cost and Beam's code path
    depended on which tests its worker had run before it; a small pipeline of ``ReadInteractions``
    and three writes took 1.05 CPU s without them, 0.53 with them. Their own tests
    (tests/test_dofn_signature_cache.py, test_pickle_compression_cache.py) run in fresh
    interpreters, as do tests/test_beam_ipython_probe.py's. Not ``tune_gc`` / ``tune_malloc``:
    tests/test_gc_tuning.py checks those."""
    from fair_forge_beam._beam import (cache_dofn_signatures, cache_dofn_sources, cache_dofn_specs,
                                       cache_pickle_compression, probe_ipython_only_when_imported)

    cache_dofn_signatures()
    cache_dofn_specs()
    cache_dofn_sources()
    cache_pickle_compression()
    probe_ipython_only_when_imported()


@pytest.fixture(scope="session")
def shared_tmp_dir(tmp_path_factory) -> Path:
    """A folder of this test session shared by its pytest-xdist workers (next to their own
    temporary folders; in one process, inside the session's): for files that several workers
    need with the same bytes and the same path (e.g. an input that is part of an ``audit_once``
    command). Write into it atomically (a temporary name, then ``replace``)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # .../pytest-N: the workers' folders are .../pytest-N/popen-gwK
    path = root / "shared"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def audit_once(shared_tmp_dir):
    """``(argv) -> (doc, out)``: the main job (:func:`pipelines.audit.run`) with ``argv`` plus
    ``--output <new folder>``, run at most once per test session for each exact ``argv`` tuple,
    across the session's pytest-xdist workers too.

    Modules that need the same end-to-end run (e.g. the in-memory reference of the runner suite,
    the toxicity runner checks and the pipeline-output checks) share it instead of repeating a
    minute-long audit. Under xdist they may sit in different workers: the first worker to ask
    runs the audit under a lock file (``fcntl.flock``) in :func:`shared_tmp_dir` and leaves the
    output folder and the pickled ``doc`` there; the others wait for the lock and read them.
    ``doc`` is a fresh copy per call (a test may change it); the output folder ``out`` is shared
    and must be treated as read-only. An audit that raises is not cached (the next caller runs it
    again and sees the same error).
    """
    import copy
    import hashlib
    import json
    import pickle
    import shutil

    from pipelines import audit

    cache: dict[tuple, tuple] = {}

    def run_locked(key: tuple) -> tuple:
        entry = shared_tmp_dir / ("audit-once-" + hashlib.blake2b(json.dumps(key).encode(), digest_size=12).hexdigest())
        done = entry.with_suffix(".doc.pickle")
        with open(entry.with_suffix(".lock"), "w") as lock:
            try:
                import fcntl

                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            except ImportError:  # no fcntl (Windows): workers do not share, each runs its own
                entry = entry.with_name(f"{entry.name}-{os.getpid()}")
                done = entry.with_suffix(".doc.pickle")
            if not done.exists():
                if entry.exists():
                    shutil.rmtree(entry)  # what a failed attempt left
                doc = audit.run([*key, "--output", str(entry / "out")])
                part = done.with_suffix(".part")
                part.write_bytes(pickle.dumps(doc))
                part.replace(done)
        return pickle.loads(done.read_bytes()), entry / "out"

    def get(argv) -> tuple:
        key = tuple(argv)
        if key not in cache:
            cache[key] = run_locked(key)
        doc, out = cache[key]
        return copy.deepcopy(doc), out

    return get


@pytest.fixture
def audit_command(monkeypatch, capsys, caplog):
    """``(argv, cwd=REPO, process=False) -> subprocess.CompletedProcess``: the command line
    ``python -m pipelines.audit argv`` from ``cwd``, answered in this process
    (:func:`pipelines.audit.main`: the same parse, checks and messages, any subcommand), for tests of
    what a command refuses before its pipeline, not of the process. Each ``python -m`` costs about
    1 CPU s, nearly all of it importing Beam, for a one-line answer (fast44: 25 of
    tests/test_outputs_apart.py's 28 CPU s in the fast tier).

    The result is what the process would show: the exit code (``SystemExit``'s or ``main``'s), stdout,
    and stderr with every log record of INFO or above the command makes in front of what it writes
    there (the command's logging prints them on stderr; under pytest they would reach its capture
    instead), so a stray line still counts. ``process=True`` (one case of each kind a module checks)
    also runs the real process and asserts both answers are the same, byte for byte."""
    import logging
    import subprocess
    import sys

    from helpers import REPO
    from pipelines import audit

    def run(argv, cwd: Path = REPO, process: bool = False):
        argv = [str(a) for a in argv]
        capsys.readouterr()
        caplog.clear()
        monkeypatch.chdir(cwd)
        with caplog.at_level(logging.INFO):
            try:
                code = audit.main(argv)
            except SystemExit as exc:
                code = exc.code
        out, err = capsys.readouterr()
        logged = "".join(f"{r.levelname} {r.name}: {r.getMessage()}\n" for r in caplog.records)
        answer = subprocess.CompletedProcess(argv, code, out, logged + err)
        if process:
            proc = subprocess.run([sys.executable, "-m", "pipelines.audit", *argv], cwd=cwd, capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
            assert (proc.returncode, proc.stdout, proc.stderr) == (answer.returncode, answer.stdout, answer.stderr)
        return answer

    return run


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test (the checks of Beam's options run with no network and no
    credentials); no Cloud SDK region from the environment."""
    import socket

    def refuse(*a, **k):
        raise AssertionError(f"a connection was attempted: {a}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("CLOUDSDK_COMPUTE_REGION", raising=False)


@pytest.fixture
def short_beam_backoff(monkeypatch):
    """Beam's waits around a failed batch of a ``RemoteModelHandler`` (the judge's, the guardian's,
    the assistant's), made short for this test: the back-off between the attempts of a batch
    (``apache_beam.utils.retry.with_exponential_backoff``: first about 5 s, then 10 and 20 s)
    0.01-0.02 s, and the client-side throttler's delay (``ReactiveThrottler.throttle_delay_secs``,
    5 s per throttled attempt, drawn at random after failures) 0 s (an int: Beam adds it to an
    integer counter). Every attempt is still made and the throttler decides as before (its
    decisions do not depend on the delay); only the waits are shorter. For in-process runs
    (FnApiRunner in memory) of tests whose point is what the attempts do, not how long a run
    waits: never for a test that bounds a run's wall time (such a bound counts these waits)."""
    import functools

    from apache_beam.io.components import adaptive_throttler
    from apache_beam.utils import retry

    monkeypatch.setattr(retry, "with_exponential_backoff",
                        functools.partial(retry.with_exponential_backoff, initial_delay_secs=0.01, max_delay_secs=0.02))
    init = adaptive_throttler.ReactiveThrottler.__init__

    def short_delay(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.throttle_delay_secs = 0

    monkeypatch.setattr(adaptive_throttler.ReactiveThrottler, "__init__", short_delay)


# The modules of the runner suite (marked ``runners``), and the modules that share end-to-end runs
# with it through ``audit_once``: under xdist these run in the runner suite's workers, so the
# shared runs are not repeated in another process.
RUNNER_MODULES = ("test_kafka_flink.py", "test_runners_integration.py", "test_flink_scale.py")
FLINK_MODULES = ("test_kafka_flink.py", "test_flink_scale.py")  # wholly in the Flink group
SHARES_RUNNER_AUDITS = ("test_toxicity_runners.py",)
FLINK_GROUP, RUNNERS_GROUP = "flink", "runners"
FIRST_GROUPS = (FLINK_GROUP, RUNNERS_GROUP)  # the longest groups, started first
# Then the longest modules (serial seconds, quiet 2-core machine, largest first), so that no long
# module starts last and runs alone at the end while the other workers are idle. Added from the
# last full run with --durations (three workers, loaded machine): test_rollup_inputs.py (the fourth
# longest group there, ~560 worker-s, not listed: it started in name order near the end and ran
# alone for its last ~140 s) and, after the list, the other modules of over ~120 worker-s there,
# largest first.
LONG_MODULES = ("test_rollup.py", "test_docs_scheduled.py", "test_rollup_inputs.py", "test_embedder.py", "test_optimizer.py",
                "test_pipeline_outputs.py", "test_main_job_judges.py",
                "test_explainability.py", "test_reader_hostile.py", "test_shard_invariance.py",
                "test_prompt_evaluator.py", "test_report.py", "test_cli.py", "test_clustering.py",
                "test_toxicity_classifier.py",
                "test_outputs_identity.py", "test_bounded_reading.py", "test_metadata_slices.py", "test_safe_outputs.py",
                "test_damaged_side_files.py", "test_bounded_decompression.py", "test_gates_baseline.py",
                "test_statistical_primitives.py", "test_gates.py", "test_bestof.py")


#: long tests that use no module fixture, each a group of its own (so xdist spreads them over
#: workers instead of running them after their module's other tests)
OWN_GROUP = {"test_rollup.py": ("test_rollup_equals_one_audit_of_all_days_bayesian",
                                "test_rollup_equals_one_audit_of_all_days_frequentist")}


def xdist_scope(nodeid: str) -> str:
    """The group of a test under xdist (one worker runs a group whole, in order): its module (so
    module fixtures run once), except the runner suite, split in two — everything that runs on the
    Flink cluster (its Flink runs and the Kafka tests: one cluster per session) and its other runs
    (multi-process, Prism) with the modules that share their audits. Computed from the node id,
    which is all xdist's controller sees."""
    path, _, name = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    if name.split("[", 1)[0] in OWN_GROUP.get(module, ()):
        return f"{module}::{name}"
    if module in RUNNER_MODULES:
        return FLINK_GROUP if module in FLINK_MODULES or "flink" in name else RUNNERS_GROUP
    return RUNNERS_GROUP if module in SHARES_RUNNER_AUDITS else module


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core plus one, at most 4. The Flink group's worker spends much
    of its time waiting (event-time windows, allowed lateness, job start-up on the cluster's
    JVMs), and the extra worker uses that core meanwhile. When ``-m`` leaves out the Flink group
    (its tests are marked ``slow`` and ``runners``: the fast tier, ``-m "not slow"``), no worker
    waits: one worker per core, at most 4 (a third worker on two cores only collects the suite once
    more, about 16-18 CPU s, and shares the same two cores; docs/testing.md: Tiers)."""
    extra = 1 if _may_select_the_flink_group(config) else 0
    return min(4, (os.cpu_count() or 1) + extra)


def _may_select_the_flink_group(config) -> bool:
    """Whether ``-m`` (if given) selects a test marked ``slow`` and ``runners``, as the Flink group's are."""
    markexpr = config.getoption("markexpr", "") or ""
    if not markexpr.strip():
        return True
    try:
        from _pytest.mark.expression import Expression

        return bool(Expression.compile(markexpr).evaluate(lambda name, **kwargs: name in ("slow", "runners")))
    except Exception:  # noqa: BLE001 - an expression this cannot read: keep the extra worker
        return True


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with :func:`xdist_scope` as the scope. (xdist's own ``loadgroup``
    mode renames node ids, which pytest 9 no longer allows: its groups are silently ignored.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    """Order the tests.

    One process (``-n 0``, or xdist absent): the modules marked ``runners``
    (tests/test_kafka_flink.py, tests/test_runners_integration.py) run last, one after the other:
    they share one Flink cluster (:func:`flink_cluster`), which then lives only while they run.

    An xdist worker (pytest.ini: ``-n auto``): the groups of :func:`xdist_scope` are the scopes of
    :func:`pytest_xdist_make_scheduler`; the two longest (the runner suite's) come first, so that
    two workers start them at once, then the modules of ``LONG_MODULES`` (longest first), then
    the others in collection order. Tests keep their order within a group. Raises ``pytest.UsageError`` when a module marked
    ``runners`` is not in ``RUNNER_MODULES`` (its Flink runs would get a cluster of their own)."""
    strays = sorted({i.path.name for i in items if i.get_closest_marker("runners") is not None} - set(RUNNER_MODULES))
    if strays:
        raise pytest.UsageError(f"tests/conftest.py: add {strays} to RUNNER_MODULES (they are marked runners)")
    # an xdist worker collects with option.dist == "no"; its environment names the worker
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        items[:] = sorted(items, key=lambda item: item.get_closest_marker("runners") is not None)
        return
    first = {g: i for i, g in enumerate((*FIRST_GROUPS, *LONG_MODULES))}
    items[:] = sorted(items, key=lambda item: first.get(xdist_scope(item.nodeid),
                                                        first.get(item.path.name, len(first))))


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory):
    """``() -> FlinkCluster``: ONE local Flink cluster (JobManager + 3 one-slot TaskManagers + Beam's
    job server, :mod:`fair_forge_beam.testing.flink_cluster`; jobs of parallelism 2, and the Kafka
    panes job of parallelism 1 beside them on the third TaskManager) per test session, shared by
    the runner suite and the Kafka tests instead of one cluster per module.

    When the Kafka artifacts are cached too, it is a
    :class:`~fair_forge_beam.testing.kafka.KafkaFlinkCluster` (the job server on KafkaIO's
    classpath), which runs the runner suite's jobs as well; otherwise a plain ``FlinkCluster``.
    The cluster boots in a background thread as soon as a test first asks for the fixture (its
    JVMs start while that module prepares: the Kafka broker, the in-memory audits); ``get()``
    waits for it and fails with the cause when it did not start, or when the Flink artifacts are
    missing (callers check that first and skip or fail as their CI rule says).

    The cluster is stopped after the teardown of the last test of this process that may use it
    (:func:`pytest_runtest_teardown`: the Flink group's last test, :func:`last_flink_item`), not
    at the end of the session: under pytest-xdist its worker goes on with other modules, and its
    five idle JVMs held ~2.3 GB and 4 % of a core (measured: 3.6 CPU s in 90 s) until the session
    ended. A test that asks for the cluster after that boots a new one. Stopping, then or at the
    end of the session: every job still running is cancelled, the cluster is stopped and the
    teardown of that test (or of the session) fails if one of its processes survives; logs stay
    under ``flink-cluster*/log``.
    """
    from concurrent.futures import ThreadPoolExecutor

    from fair_forge_beam.testing import kafka as kf
    from fair_forge_beam.testing import beam_runners as rn
    from fair_forge_beam.testing.flink_cluster import FlinkCluster

    holder: dict = {}
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flink-start")

    def boot() -> None:
        if rn.missing_reason("flink") is None:
            workdir = tmp_path_factory.mktemp("flink-cluster")
            kind = kf.KafkaFlinkCluster if kf.missing_reason() is None else FlinkCluster
            # jobs of parallelism 2, and a third TaskManager for the Kafka panes job (parallelism 1) beside them
            cluster = kind(task_managers=3, parallelism=2, workdir=workdir, ends_with_owner=True)
            holder["cluster"], holder["starting"] = cluster, pool.submit(cluster.start)

    def get() -> FlinkCluster:
        if holder.pop("stopped", False) and "error" not in holder:
            boot()  # asked for after the Flink group's last test: a new cluster
        if "error" in holder:
            pytest.fail(holder["error"])
        if "starting" not in holder:
            pytest.fail("the Flink cluster was not started (artifacts missing)")
        try:
            holder["starting"].result()
        except (RuntimeError, FileNotFoundError) as e:
            holder["error"] = f"the Flink cluster did not start: {e}"
            pytest.fail(holder["error"])
        return holder["cluster"]

    def stop() -> None:
        """Stop the cluster now (idempotent); fails if one of its processes survives."""
        starting = holder.pop("starting", None)
        if starting is None:
            return
        holder["stopped"] = True
        starting.exception()  # wait: never stop a cluster while it is starting
        if starting.exception() is not None:
            return  # start() stopped what it began; get() reported the cause
        cluster = holder.pop("cluster")
        pids = list(cluster.pids)
        try:
            kf.cancel_flink_jobs(cluster.rest_url)
        finally:
            cluster.stop()
        left = [pid for pid in pids if alive(pid)]
        assert not left, f"Flink cluster processes still running after cleanup: {left}"

    boot()
    _FLINK_STOP[:] = [stop]
    try:
        yield get
    finally:
        _FLINK_STOP.clear()
        try:
            stop()
        finally:
            pool.shutdown(wait=True)


#: the running session's :func:`flink_cluster` stop function, while the fixture is set up
_FLINK_STOP: list = []
#: the node id of the last test of this process that may use the Flink cluster (:func:`last_flink_item`)
_LAST_FLINK: list = []


def last_flink_item(items) -> str | None:
    """The node id of the last of ``items`` (in run order) that may use the session's Flink cluster:
    a test of the Flink group (:func:`xdist_scope`; its Flink runs ask for the cluster themselves,
    e.g. by ``request.getfixturevalue``) or one whose fixtures include ``flink_cluster``."""
    last = None
    for item in items:
        if xdist_scope(item.nodeid) == FLINK_GROUP or "flink_cluster" in getattr(item, "fixturenames", ()):
            last = item.nodeid
    return last


def pytest_collection_finish(session):
    """Remember :func:`last_flink_item` of the final list (after ordering and deselection): an xdist
    worker runs its scopes' tests in that list's order, the Flink group whole in one worker."""
    _LAST_FLINK[:] = [last_flink_item(session.items)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the usual teardown of the last test that may use the Flink cluster (its module's
    fixtures, the Kafka stack's included, already torn down when the next test is in another
    module), stop the cluster (:func:`flink_cluster`); a process of it left running fails this
    teardown."""
    result = yield
    if _FLINK_STOP and _LAST_FLINK and item.nodeid == _LAST_FLINK[0]:
        _FLINK_STOP[0]()
    return result


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"shared data folder not found at {SHARED}")
    return SHARED


# ------------------------------------------------------------------ headless Chromium (HTML reports)
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium context (1200 × 900, own profile, no background network) for the module."""
    sync_api = chromium_or_skip()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, viewport={"width": 1200, "height": 900},
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )
        yield ctx
        ctx.close()




#: a fast-tier test (not marked ``slow``) whose setup + call + teardown took longer than this many
#: seconds is named at the end of the run (docs/testing.md: a fast test takes under about 1.5 s on a
#: quiet 2-core machine; a test over 3 s is named: twice that leaves room for a loaded one)
FAST_TIER_BUDGET_S = 3.0
_over_budget: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Adds up each unmarked test's phases (the controller sees every worker's reports)."""
    if "slow" not in report.keywords:
        _over_budget[report.nodeid] = _over_budget.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """Names the fast-tier tests over :data:`FAST_TIER_BUDGET_S`: a test added without its ``slow``
    mark is how the fast tier grew past its 5 minutes (2026-12-06: 15 tests of 6–27 s)."""
    over = sorted(((d, n) for n, d in _over_budget.items() if d > FAST_TIER_BUDGET_S), reverse=True)
    if over:
        terminalreporter.write_line(f"fast-tier tests over {FAST_TIER_BUDGET_S:.0f} s (mark them slow if they are "
                                    f"on a quiet machine too, docs/testing.md): "
                                    + ", ".join(f"{n} {d:.1f} s" for d, n in over[:20]))
