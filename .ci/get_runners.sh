#!/usr/bin/env bash
# Obtain the real runners for the integration suite (tests/test_runners_integration.py) and
# cache them between runs in $FAIR_FORGE_RUNNERS_DIR (default ~/.cache/fair_forge_beam/runners):
#   * Prism: `go install github.com/apache/beam/sdks/v2/go/cmd/prism@v<beam>` (Go module proxy;
#     the module and build caches under ~/go and ~/.cache/go-build make a rebuild cheap);
#   * Flink: Beam's job-server jar beam-runners-flink-<flink>-job-server:<beam> from Maven Central
#     (`mvn dependency:get`, kept in ~/.m2 and copied here).
# <beam> is the apache-beam pin of requirements.txt. When a registry answers that it does not
# serve an artifact, its answer is written to <name>.unavailable (the test names it); any other
# failure (no network, time-out) leaves no such note, so the suite fails under CI=true.
# Never fails itself: the test decides. Prints what it did.
set -uo pipefail
cd "$(dirname "$0")/.."
BEAM=$(sed -n 's/^apache-beam==\([0-9][0-9.]*\).*/\1/p' requirements.txt | head -1)
FLINK=${FAIR_FORGE_FLINK_VERSION:-1.20}
DIR=${FAIR_FORGE_RUNNERS_DIR:-$HOME/.cache/fair_forge_beam/runners}
mkdir -p "$DIR"
echo "== runners: Beam $BEAM, cache $DIR"

# ---- Prism
PRISM="$DIR/prism-v$BEAM"
if [ -x "$PRISM" ]; then
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

# ---- Flink job server
ART="org.apache.beam:beam-runners-flink-$FLINK-job-server:$BEAM"
JAR="$DIR/beam-runners-flink-$FLINK-job-server-$BEAM.jar"
if [ -n "${FAIR_FORGE_FLINK_JOB_SERVER_JAR:-}" ]; then
  echo "== flink: using FAIR_FORGE_FLINK_JOB_SERVER_JAR=$FAIR_FORGE_FLINK_JOB_SERVER_JAR"
elif [ -f "$JAR" ]; then
  echo "== flink: cached $JAR"
elif ! command -v mvn >/dev/null; then
  echo "== flink: no mvn command on PATH; not fetched"
else
  echo "== flink: mvn dependency:get $ART"
  start=$SECONDS
  M2JAR="$HOME/.m2/repository/org/apache/beam/beam-runners-flink-$FLINK-job-server/$BEAM/beam-runners-flink-$FLINK-job-server-$BEAM.jar"
  # -U: ask the registry again rather than trust a cached "not found"
  if out=$(timeout 1200 mvn -B -q -U dependency:get -Dartifact="$ART" -Dtransitive=false 2>&1) && [ -f "$M2JAR" ]; then
    cp "$M2JAR" "$JAR" && rm -f "$DIR/flink.unavailable"
    echo "== flink: fetched $JAR ($(du -h "$JAR" | cut -f1)) in $((SECONDS - start)) s"
  elif echo "$out" | grep -qE "Could not find artifact|Failure to find"; then
    echo "Maven Central (as reached from this machine) does not serve $ART: $(echo "$out" | grep -m1 -oE "(Could not find|Failure to find) artifact[^:]*:[^ ]*( in [^ ]*)?")" > "$DIR/flink.unavailable"
    echo "== flink: not served by the registry (noted in $DIR/flink.unavailable)"
  else
    echo "$out" | tail -5
    echo "== flink: fetch failed after $((SECONDS - start)) s"
  fi
fi
exit 0
