#!/usr/bin/env bash
# Obtain the Java parts of the Kafka test (tests/test_kafka_flink.py) and cache them next to the
# runners of .ci/get_runners.sh, in $FAIR_FORGE_RUNNERS_DIR (default ~/.cache/fair_forge_beam/runners):
#   * kafka-broker/lib/    — a Kafka 4.1 broker (KRaft) and its storage tool (.ci/kafka/broker-pom.xml);
#   * kafka-expansion/lib/ — Beam's Java expansion service with KafkaIO on one classpath with the
#     Flink job server's (.ci/kafka/expansion-pom.xml), and kafka-expansion/classes/: the compiled
#     .ci/kafka/LoopbackExpansionService.java, with which fair_forge_beam/testing/kafka.py starts
#     the service bound to 127.0.0.1.
# Both from Maven Central (mvn dependency:copy-dependencies); fetched again when their pom changed. When the registry answers that it
# does not serve an artifact, its answer is written to kafka.unavailable (the test quotes it);
# any other failure leaves no such note, so the test fails under CI=true.
# Never fails itself: the test decides. Prints what it did.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${FAIR_FORGE_RUNNERS_DIR:-$HOME/.cache/fair_forge_beam/runners}
mkdir -p "$DIR"
rm -f "$DIR/kafka.unavailable"
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
  echo "== kafka: no mvn/java on PATH; nothing fetched"
  exit 0
fi
fetch() {  # $1: cache folder name, $2: pom
  local dest="$DIR/$1" tmp="$DIR/$1.tmp.$$" start=$SECONDS out
  if [ -f "$dest/lib/.complete" ] && cmp -s "$2" "$dest/pom.xml"; then
    echo "== $1: cached $dest/lib ($(ls "$dest/lib" | wc -l) jars)"
    return
  fi
  echo "== $1: mvn dependency:copy-dependencies -f $2"
  rm -rf "$tmp"
  # -U: ask the registry again rather than trust a cached "not found"
  if out=$(timeout 1800 mvn -B -U -f "$2" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp/lib" 2>&1); then
    cp "$2" "$tmp/pom.xml" && touch "$tmp/lib/.complete" && rm -rf "$dest" && mv "$tmp" "$dest"
    echo "== $1: $(ls "$dest/lib" | wc -l) jars ($(du -sh "$dest/lib" | cut -f1)) in $((SECONDS - start)) s"
  else
    echo "$out" | grep -E "ERROR|BUILD" | head -5
    if echo "$out" | grep -qE "Could not find artifact|Failure to find"; then
      echo "$1: $(echo "$out" | grep -m1 -oE "(Could not find|Failure to find) artifact [^ ]+( in [^ ]+)?")" >> "$DIR/kafka.unavailable"
      echo "== $1: the registry does not serve a part (noted in $DIR/kafka.unavailable)"
    else
      echo "== $1: fetch failed after $((SECONDS - start)) s"
    fi
  fi
  rm -rf "$tmp"
}
fetch kafka-broker .ci/kafka/broker-pom.xml
fetch kafka-expansion .ci/kafka/expansion-pom.xml
# The expansion service bound to 127.0.0.1 (ExpansionService.main binds every interface).
EXP="$DIR/kafka-expansion"
if [ -f "$EXP/lib/.complete" ] && ! cmp -s .ci/kafka/LoopbackExpansionService.java "$EXP/classes/LoopbackExpansionService.java"; then
  rm -rf "$EXP/classes.tmp" && mkdir -p "$EXP/classes.tmp"
  if command -v javac >/dev/null && javac -nowarn -cp "$EXP/lib/*" -d "$EXP/classes.tmp" .ci/kafka/LoopbackExpansionService.java; then
    cp .ci/kafka/LoopbackExpansionService.java "$EXP/classes.tmp/" && rm -rf "$EXP/classes" && mv "$EXP/classes.tmp" "$EXP/classes"
    echo "== kafka-expansion: compiled $EXP/classes/LoopbackExpansionService.class"
  else
    rm -rf "$EXP/classes.tmp"; echo "== kafka-expansion: could not compile .ci/kafka/LoopbackExpansionService.java"
  fi
fi
exit 0
