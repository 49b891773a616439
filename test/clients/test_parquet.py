#!/usr/bin/python3
"""skiff's in-tree Parquet writer read by two readers written independently of it: DuckDB
(@duckdb/node-api: read_parquet, parquet_schema, parquet_metadata, parquet_kv_metadata) and
hyparquet. parquet_write_sample (test/unit/parquet/write_sample.cpp) writes the sample table
twice (ZSTD with dictionaries and small pages; uncompressed PLAIN) plus the rows it meant to
write, computed from a formula; verify_parquet.mjs prints what the readers see. Every row
(nulls, empty and null lists, null header values included), every field id, the codecs,
encodings and statistics must match.

    test_parquet.py --sample build/test/unit/parquet/parquet_write_sample
Exits 0 on success, 1 on a mismatch or without node and the npm packages.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.environ.get("SKIFF_NODE_DIR", os.path.join(HERE, "node"))
GROUPS = [300, 1200, 37]
# Iceberg's Kafka table: (name, field id) in depth-first schema order, before the extra columns.
KAFKA_IDS = [("partition", 1), ("offset", 2), ("timestamp", 3), ("key", 4), ("value", 5), ("headers", 6),
             ("list", None), ("element", 7), ("key", 8), ("value", 9)]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"row {i}: got {json.dumps(x)[:400]} want {json.dumps(y)[:400]}"
    return f"{len(a)} rows, want {len(b)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", required=True, help="path of parquet_write_sample")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if shutil.which("node") is None or not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@duckdb")):
        # A missing verifier is a failure, never a skip (tools/install-deps.sh --all installs it).
        print("FAIL: node or test/clients/node/node_modules missing (tools/install-deps.sh --all)")
        return 1

    tmp = tempfile.mkdtemp(prefix="skiff-parquet-")
    try:
        subprocess.run([args.sample, tmp], check=True, timeout=120)
        expected = json.load(open(os.path.join(tmp, "expected.json"), encoding="utf-8"))
        files = [os.path.join(tmp, "zstd.parquet"), os.path.join(tmp, "plain.parquet")]
        out = subprocess.run(["node", os.path.join(HERE, "verify_parquet.mjs"), *files], check=True, timeout=300,
                             capture_output=True, text=True)
        seen = json.loads(out.stdout)
    finally:
        if args.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    rows = expected["rows"]
    # The sample must exercise what it claims, or the comparisons below prove little.
    check(len(rows) == sum(GROUPS), "sample row count")
    for col in ["key", "value", "headers", "s", "l", "d", "b", "t", "day", "fixed"]:
        check(any(r[col] is None for r in rows), f"sample has a null {col}")
        check(any(r[col] is not None for r in rows), f"sample has a non-null {col}")
    check(any(r["headers"] == [] for r in rows), "sample has an empty list")
    check(any(h["value"] is None for r in rows for h in (r["headers"] or [])), "sample has a null header value")
    check(any(len(r["headers"] or []) == 3 for r in rows), "sample has 3-element lists")

    want_schema = [(n, i) for n, i in expected["schema"]]
    check(want_schema[1:len(KAFKA_IDS) + 1] == KAFKA_IDS, "the sample's own schema carries the Kafka table ids")

    for f, codec in zip(seen["files"], ["ZSTD", "UNCOMPRESSED"]):
        name = os.path.basename(f["path"])
        check(f["duckdb_rows"] == rows, f"{name}: DuckDB rows: " + first_diff(f["duckdb_rows"], rows))
        check(f["hyparquet_rows"] == rows, f"{name}: hyparquet rows: " + first_diff(f["hyparquet_rows"], rows))

        got_schema = [(s["name"], None if s["field_id"] is None else int(s["field_id"])) for s in f["schema"]]
        check(got_schema == want_schema, f"{name}: parquet_schema field ids {got_schema} want {want_schema}")
        by_name = {s["name"]: s for s in f["schema"]}
        ts = by_name["timestamp"]
        check(ts["type"] == "INT64" and ts["repetition_type"] == "REQUIRED", f"{name}: timestamp is a required INT64")
        check("isAdjustedToUTC=1" in (ts["logical_type"] or "") and "MICROS=MicroSeconds()" in (ts["logical_type"] or ""),
              f"{name}: timestamp logical type {ts['logical_type']}")
        check(by_name["headers"]["converted_type"] == "LIST", f"{name}: headers is a LIST")
        check(by_name["list"]["repetition_type"] == "REPEATED", f"{name}: the list's middle level repeats")
        check(by_name["s"]["converted_type"] == "UTF8", f"{name}: s is UTF8")
        check(by_name["day"]["converted_type"] == "DATE", f"{name}: day is a DATE")

        kv = {e["key"]: e["value"] for e in f["kv"]}
        want_kv = {"skiff.sample": "zstd", "iceberg.schema": "{}"} if codec == "ZSTD" else {"skiff.sample": "plain"}
        check(kv == want_kv, f"{name}: key-value metadata {kv}")

        meta = f["metadata"]
        check(all(m["compression"] == codec for m in meta), f"{name}: every chunk is {codec}")
        check(sorted({int(m["row_group_id"]) for m in meta}) == [0, 1, 2], f"{name}: three row groups")
        dict_cols = {m["path_in_schema"] for m in meta if "RLE_DICTIONARY" in m["encodings"]}
        if codec == "ZSTD":
            check({"partition", "s", "key"} <= dict_cols, f"{name}: dictionary columns {dict_cols}")
            check("offset" not in dict_cols and "value" not in dict_cols, f"{name}: unique columns stay PLAIN")
        else:
            check(not dict_cols, f"{name}: no dictionary when disabled")
        first = 0
        for g, n in enumerate(GROUPS):
            part = rows[first:first + n]
            chunks = {m["path_in_schema"]: m for m in meta if int(m["row_group_id"]) == g}
            check(int(chunks["offset"]["num_values"]) == n, f"{name}: row group {g} has {n} rows")
            check(chunks["offset"]["stats_min_value"] == part[0]["offset"] and
                  chunks["offset"]["stats_max_value"] == part[-1]["offset"], f"{name}: offset bounds of group {g}")
            for col in ["key", "value", "s", "l", "d", "b", "t", "day", "fixed"]:
                nulls = sum(1 for r in part if r[col] is None)
                check(int(chunks[col]["stats_null_count"]) == nulls, f"{name}: null count of {col} in group {g}")
            ls = [int(r["l"]) for r in part if r["l"] is not None]
            check(int(chunks["l"]["stats_min_value"]) == min(ls) and int(chunks["l"]["stats_max_value"]) == max(ls),
                  f"{name}: l bounds of group {g}")
            entries = sum(max(1, len(r["headers"] or [])) for r in part)
            check(int(chunks["headers, list, element, key"]["num_values"]) == entries,
                  f"{name}: headers key entries in group {g}")
            first += n

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print(f"ok: {len(rows)} rows x {len(seen['files'])} files, DuckDB and hyparquet agree with the writer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
