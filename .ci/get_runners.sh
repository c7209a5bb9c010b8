#!/usr/bin/env bash
# Obtain the real runners for the integration suite (tests/test_runners_integration.py) and
# cache them between runs in $FAIR_FORGE_RUNNERS_DIR (default ~/.cache/fair_forge_beam/runners):
#   * Prism: `go install github.com/apache/beam/sdks/v2/go/cmd/prism@v<beam>` (Go module proxy;
#     the module and build caches under ~/go and ~/.cache/go-build make a rebuild cheap);
#   * Flink: a standalone Flink 1.19 distribution (PyPI, downloaded not installed), Beam's Flink
#     job server classpath (Maven Central, .ci/flink/pom.xml) and Beam's Python boot binary (Go
#     module proxy); fair_forge_beam/testing/flink_cluster.py starts a cluster from them.
# <beam> is the apache-beam pin of requirements.txt. When a registry answers that it does not
# serve an artifact, its answer is written to <name>.unavailable (the test names it); any other
# failure (no network, time-out) leaves no such note, so the suite fails under CI=true.
# Never fails itself: the test decides. Prints what it did.
# Arguments select what to obtain: `prism`, `flink` (default both).
set -uo pipefail
cd "$(dirname "$0")/.."
BEAM=$(sed -n 's/^apache-beam==\([0-9][0-9.]*\).*/\1/p' requirements.txt | head -1)
DIR=${FAIR_FORGE_RUNNERS_DIR:-$HOME/.cache/fair_forge_beam/runners}
mkdir -p "$DIR"
WANT=${*:-prism flink}
echo "== runners: Beam $BEAM, cache $DIR, obtaining: $WANT"

# ---- Prism
PRISM="$DIR/prism-v$BEAM"
if [[ " $WANT " != *" prism "* ]]; then
  :
elif [ -x "$PRISM" ]; then
  echo "== prism: cached $PRISM"
elif ! command -v go >/dev/null; then
  echo "== prism: no go command on PATH; not built"
else
  echo "== prism: go install github.com/apache/beam/sdks/v2/go/cmd/prism@v$BEAM ($(go version))"
  start=$SECONDS
  tmp=$(mktemp -d)
  if out=$(GOBIN="$tmp" timeout 2400 go install "github.com/apache/beam/sdks/v2/go/cmd/prism@v$BEAM" 2>&1); then
    mv "$tmp/prism" "$PRISM" && rm -f "$DIR/prism.unavailable"
    echo "== prism: built $PRISM in $((SECONDS - start)) s"
  else
    echo "$out" | tail -5
    if echo "$out" | grep -qE "unknown revision|invalid version|not found: "; then
      echo "$out" | tail -3 > "$DIR/prism.unavailable"
      echo "== prism: the Go module proxy does not serve it (noted in $DIR/prism.unavailable)"
    else
      echo "== prism: build failed after $((SECONDS - start)) s"
    fi
  fi
  rm -rf "$tmp"
fi

# ---- Flink: a real standalone cluster (JobManager + TaskManagers) and Beam's job server for it.
# Beam's prebuilt beam-runners-flink-<flink>-job-server jar is not served; its classpath is
# assembled from served parts by .ci/flink/pom.xml. Each part is cached on its own, in a folder
# renamed into place only when complete, so an interrupted run leaves nothing half-made.
if [[ " $WANT " != *" flink "* ]]; then exit 0; fi
FLINK_DIST_VERSION=${FAIR_FORGE_FLINK_DIST_VERSION:-1.19.3}
JOBSERVER="$DIR/flink-job-server"
FLINK_HOME_DIR="$DIR/flink-$FLINK_DIST_VERSION"
BOOT="$DIR/beam-python-boot-v$BEAM"
note_unavailable() {  # $1: what, $2: the registry's answer
  echo "$1: $2" > "$DIR/flink.unavailable"
  echo "== flink: the registry does not serve $1 (noted in $DIR/flink.unavailable)"
}
rm -f "$DIR/flink.unavailable"

# (a) the job server's classpath (about 160 jars)
if [ -f "$JOBSERVER/lib/.complete" ]; then
  echo "== flink job server: cached $JOBSERVER/lib ($(ls "$JOBSERVER/lib" | wc -l) jars)"
elif ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  echo "== flink job server: no mvn/java on PATH; not fetched"
else
  echo "== flink job server: mvn dependency:copy-dependencies -f .ci/flink/pom.xml"
  start=$SECONDS
  tmp="$JOBSERVER.tmp.$$"
  rm -rf "$tmp"
  # -U: ask the registry again rather than trust a cached "not found"
  if out=$(timeout 1800 mvn -B -U -f .ci/flink/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp/lib" 2>&1); then
    touch "$tmp/lib/.complete" && rm -rf "$JOBSERVER" && mv "$tmp" "$JOBSERVER"
    echo "== flink job server: $(ls "$JOBSERVER/lib" | wc -l) jars ($(du -sh "$JOBSERVER/lib" | cut -f1)) in $((SECONDS - start)) s"
  else
    echo "$out" | grep -E "ERROR|BUILD" | head -5
    if echo "$out" | grep -qE "Could not find artifact|Failure to find"; then
      note_unavailable "the job server's classpath" "$(echo "$out" | grep -m1 -oE "(Could not find|Failure to find) artifact [^ ]+( in [^ ]+)?")"
    else
      echo "== flink job server: fetch failed after $((SECONDS - start)) s"
    fi
  fi
  rm -rf "$tmp"
fi

# (b) the Flink distribution, from the Python package registry: the sdist of
# apache-flink-libraries holds lib/ opt/ plugins/ and bin/bash-java-utils.jar, the apache-flink
# wheel holds bin/ and conf/. Downloaded only (pip download --no-deps), never installed: apache-flink
# pins apache-beam<2.49.
if [ -f "$FLINK_HOME_DIR/.complete" ]; then
  echo "== flink $FLINK_DIST_VERSION: cached $FLINK_HOME_DIR"
else
  echo "== flink $FLINK_DIST_VERSION: pip download apache-flink-libraries, apache-flink"
  start=$SECONDS
  tmp="$FLINK_HOME_DIR.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp/dl" "$tmp/x"
  if out=$(timeout 900 python -m pip download -q --no-deps --no-binary :all: -d "$tmp/dl" "apache-flink-libraries==$FLINK_DIST_VERSION" 2>&1 \
        && timeout 600 python -m pip download -q --no-deps --only-binary :all: -d "$tmp/dl" "apache-flink==$FLINK_DIST_VERSION" 2>&1) \
     && tar xzf "$tmp"/dl/apache-flink-libraries-*.tar.gz -C "$tmp/x" \
     && python -m zipfile -e "$(ls "$tmp"/dl/apache_flink-*.whl | head -1)" "$tmp/x/wheel" \
     && d=$(ls -d "$tmp"/x/apache-flink-libraries-*/deps) && [ -f "$d/lib/flink-dist-$FLINK_DIST_VERSION.jar" ]; then
    mkdir -p "$tmp/home" && cp -r "$d"/lib "$d"/opt "$d"/plugins "$tmp/home/" \
      && cp -r "$tmp/x/wheel/pyflink/bin" "$tmp/x/wheel/pyflink/conf" "$tmp/home/" \
      && cp "$d"/bin/*.jar "$tmp/home/bin/" && chmod +x "$tmp"/home/bin/*.sh "$tmp/home/bin/flink" \
      && touch "$tmp/home/.complete" && rm -rf "$FLINK_HOME_DIR" && mv "$tmp/home" "$FLINK_HOME_DIR" \
      && echo "== flink $FLINK_DIST_VERSION: unpacked in $FLINK_HOME_DIR ($(du -sh "$FLINK_HOME_DIR" | cut -f1)) in $((SECONDS - start)) s"
  else
    echo "$out" | tail -3
    if echo "$out" | grep -qE "No matching distribution found|Could not find a version"; then
      note_unavailable "Flink $FLINK_DIST_VERSION" "$(echo "$out" | grep -m1 -E "No matching distribution|Could not find a version")"
    else
      echo "== flink $FLINK_DIST_VERSION: download or unpacking failed after $((SECONDS - start)) s"
    fi
  fi
  rm -rf "$tmp"
fi

# (c) Beam's Python SDK boot binary, the command of --environment_type=PROCESS workers
# (fair_forge_beam/testing/flink_cluster.py wraps it so that it runs the current python).
if [ -x "$BOOT" ]; then
  echo "== beam boot: cached $BOOT"
elif ! command -v go >/dev/null; then
  echo "== beam boot: no go command on PATH; not built"
else
  echo "== beam boot: go install github.com/apache/beam/sdks/v2/python/container@v$BEAM"
  start=$SECONDS
  tmp=$(mktemp -d)
  if out=$(GOBIN="$tmp" timeout 1800 go install "github.com/apache/beam/sdks/v2/python/container@v$BEAM" 2>&1); then
    mv "$tmp/container" "$BOOT" && echo "== beam boot: built $BOOT in $((SECONDS - start)) s"
  else
    echo "$out" | tail -5
    if echo "$out" | grep -qE "unknown revision|invalid version|not found: "; then
      note_unavailable "Beam's Python boot binary v$BEAM" "$(echo "$out" | tail -1)"
    else
      echo "== beam boot: build failed after $((SECONDS - start)) s"
    fi
  fi
  rm -rf "$tmp"
fi
exit 0
