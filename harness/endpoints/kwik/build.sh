#!/usr/bin/env bash
# Builds the kwik endpoint with Maven from Maven Central (pom.xml pins kwik and the
# plugins): target/kwik-endpoint.jar and its dependencies in target/lib. A no-op when
# the jar is newer than every source and the POM. Prints one line saying what it did.
set -euo pipefail
cd "$(dirname "$0")"
jar=target/kwik-endpoint.jar
if [ -f "$jar" ] && [ -z "$(find pom.xml src -newer "$jar" -print -quit)" ]; then
    echo "kwik endpoint: up to date ($jar)"
    exit 0
fi
if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
    echo "kwik endpoint: needs a JDK (17+) and Maven: apt-get install openjdk-17-jdk-headless maven" >&2
    exit 1
fi
start=$(date +%s)
mvn -q -B package
echo "kwik endpoint: built $jar (kwik $(sed -n 's:.*<kwik.version>\(.*\)</kwik.version>.*:\1:p' pom.xml)) in $(( $(date +%s) - start )) s"
