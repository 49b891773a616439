#!/usr/bin/python3
"""Iceberg manifests and manifest lists written by skiff's in-tree Avro writer, decoded by
independent readers: avsc (npm) and icebird's Avro reader (the one the Iceberg table tests use),
both through verify_avro.mjs. For each codec (null, deflate), avro_write_samples writes a
manifest of three data files and the manifest list naming it; this checks the field id of
every field, the record names, the header metadata, the counts and lengths (manifest_length
is the manifest's size) and every value.

    test_avro_manifests.py --samples build/test/unit/avro/avro_write_samples
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SNAPSHOT_ID = 3051729675574597004  # past 2^53: longs must survive exactly

# Field ids of every field of the manifest entry schema, by path (Iceberg spec, "Manifests").
ENTRY_IDS = {
    "status": 0, "snapshot_id": 1, "sequence_number": 3, "file_sequence_number": 4, "data_file": 2,
    "data_file.content": 134, "data_file.file_path": 100, "data_file.file_format": 101,
    "data_file.partition": 102, "data_file.partition.timestamp_day": 1000,
    "data_file.record_count": 103, "data_file.file_size_in_bytes": 104,
    "data_file.column_sizes": 108, "data_file.column_sizes.key": 117, "data_file.column_sizes.value": 118,
    "data_file.value_counts": 109, "data_file.value_counts.key": 119, "data_file.value_counts.value": 120,
    "data_file.null_value_counts": 110, "data_file.null_value_counts.key": 121, "data_file.null_value_counts.value": 122,
    "data_file.nan_value_counts": 137, "data_file.nan_value_counts.key": 138, "data_file.nan_value_counts.value": 139,
    "data_file.lower_bounds": 125, "data_file.lower_bounds.key": 126, "data_file.lower_bounds.value": 127,
    "data_file.upper_bounds": 128, "data_file.upper_bounds.key": 129, "data_file.upper_bounds.value": 130,
    "data_file.key_metadata": 131, "data_file.split_offsets": 132, "data_file.split_offsets.element": 133,
    "data_file.equality_ids": 135, "data_file.equality_ids.element": 136, "data_file.sort_order_id": 140,
}
ENTRY_RECORD_NAMES = {"": "manifest_entry", "data_file": "r2", "data_file.partition": "r102",
                      "data_file.column_sizes": "k117_v118", "data_file.lower_bounds": "k126_v127"}

LIST_IDS = {
    "manifest_path": 500, "manifest_length": 501, "partition_spec_id": 502, "content": 517,
    "sequence_number": 515, "min_sequence_number": 516, "added_snapshot_id": 503,
    "added_files_count": 504, "existing_files_count": 505, "deleted_files_count": 506,
    "added_rows_count": 512, "existing_rows_count": 513, "deleted_rows_count": 514,
    "partitions": 507, "partitions.element": 508, "partitions.contains_null": 509,
    "partitions.contains_nan": 518, "partitions.lower_bound": 510, "partitions.upper_bound": 511,
    "key_metadata": 519,
}
LIST_RECORD_NAMES = {"": "manifest_file", "partitions": "r508"}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def non_null(t):
    """The non-null branch of an optional union."""
    if isinstance(t, list):
        rest = [b for b in t if b != "null"]
        check(len(rest) == 1 and "null" in t, f"union {t} is not an optional")
        return rest[0]
    return t


def walk(record, prefix, ids, names):
    """Collects path -> field id of every field (and element/map ids), and record names."""
    names[prefix] = record["name"]
    for f in record["fields"]:
        path = f"{prefix}.{f['name']}" if prefix else f["name"]
        check("field-id" in f, f"field {path} has no field-id")
        ids[path] = f["field-id"]
        t = non_null(f["type"])
        if isinstance(t, dict) and t.get("type") == "record":
            walk(t, path, ids, names)
        elif isinstance(t, dict) and t.get("type") == "array":
            items = t["items"]
            if t.get("logicalType") == "map":
                # Iceberg's int-keyed map: an array of key/value records, ids on the record fields.
                check(isinstance(items, dict) and [x["name"] for x in items["fields"]] == ["key", "value"],
                      f"{path}: map items are not key/value records")
                names[path] = items["name"]
                for kv in items["fields"]:
                    check("field-id" in kv, f"{path}.{kv['name']} has no field-id")
                    ids[f"{path}.{kv['name']}"] = kv["field-id"]
            else:
                check("element-id" in t, f"list {path} has no element-id")
                ids[f"{path}.element"] = t["element-id"]
                if isinstance(items, dict) and items.get("type") == "record":
                    walk(items, path, ids, names)
    return ids, names


def le(n, size):
    return n.to_bytes(size, "little", signed=True).hex()


def check_manifest(f, icebird_records):
    ids, names = walk(f["schema"], "", {}, {})
    check(ids == ENTRY_IDS, f"manifest field ids differ: {sorted(set(ids.items()) ^ set(ENTRY_IDS.items()))}")
    for path, name in ENTRY_RECORD_NAMES.items():
        check(names.get(path) == name, f"record at '{path}' is named {names.get(path)}, not {name}")
    part = non_null(f["schema"]["fields"][4]["type"]["fields"][3]["type"]["fields"][0]["type"])
    check(part == {"type": "int", "logicalType": "date"}, f"timestamp_day has type {part}")

    meta = f["metadata"]
    for key in ("avro.schema", "avro.codec", "schema", "schema-id", "partition-spec", "partition-spec-id",
                "format-version", "content"):
        check(key in meta, f"manifest metadata lacks {key}")
    check(meta["format-version"] == "2", "format-version is not 2")
    check(meta["content"] == "data", "content is not data")
    check(meta["schema-id"] == "0" and meta["partition-spec-id"] == "0", "schema-id / partition-spec-id")
    check(json.loads(meta["partition-spec"]) ==
          [{"name": "timestamp_day", "transform": "day", "source-id": 3, "field-id": 1000}], "partition-spec")
    table_schema = json.loads(meta["schema"])
    check(table_schema["type"] == "struct" and [x["id"] for x in table_schema["fields"]] == [1, 2, 3], "schema")

    recs = f["records"]
    check(len(recs) == 3, f"manifest has {len(recs)} entries, not 3")
    for i, e in enumerate(recs):
        check(e["status"] == 1, f"entry {i} status")
        check(e["snapshot_id"] == SNAPSHOT_ID, f"entry {i} snapshot_id {e['snapshot_id']}")
        check(e["sequence_number"] == 5 and e["file_sequence_number"] == 5, f"entry {i} sequence numbers")
        d = e["data_file"]
        n = 1000 * (i + 1)
        expect = {
            "content": 0,
            "file_path": f"s3://bucket/warehouse/topic/data/timestamp_day=2024-01-0{i + 1}/{i}.parquet",
            "file_format": "PARQUET",
            "partition": {"timestamp_day": 19723 + i},
            "record_count": n,
            "file_size_in_bytes": 65536 + i,
            "column_sizes": [{"key": 1, "value": 100}, {"key": 2, "value": 4000}],
            "value_counts": [{"key": 1, "value": n}, {"key": 2, "value": n}],
            "null_value_counts": [{"key": 1, "value": 0}, {"key": 2, "value": 0}],
            "nan_value_counts": None,
            "lower_bounds": [{"key": 2, "value": le(1000 * i, 8)}],
            "upper_bounds": [{"key": 2, "value": le(1000 * i + 999, 8)}],
            "key_metadata": "dead" if i == 2 else None,
            "split_offsets": [4],
            "equality_ids": None,
            "sort_order_id": 0,
        }
        check(d == expect, f"entry {i} data_file differs:\n{json.dumps(d, indent=1)}\nexpected\n{json.dumps(expect, indent=1)}")
        # icebird turns the date into a calendar day; otherwise it must agree with avsc.
        ib = json.loads(json.dumps(icebird_records[i]))
        day = (datetime.date(1970, 1, 1) + datetime.timedelta(days=19723 + i)).isoformat()
        check(ib["data_file"]["partition"] == {"timestamp_day": day}, f"icebird entry {i} partition {ib['data_file']['partition']}")
        ib["data_file"]["partition"] = d["partition"]
        check(ib == e, f"icebird entry {i} differs from avsc's: {ib}")
    return recs


def check_list(f, icebird_records, manifest_path, manifest_entries):
    ids, names = walk(f["schema"], "", {}, {})
    check(ids == LIST_IDS, f"manifest list field ids differ: {sorted(set(ids.items()) ^ set(LIST_IDS.items()))}")
    for path, name in LIST_RECORD_NAMES.items():
        check(names.get(path) == name, f"record at '{path}' is named {names.get(path)}, not {name}")
    meta = f["metadata"]
    for key in ("avro.schema", "avro.codec", "snapshot-id", "parent-snapshot-id", "sequence-number", "format-version"):
        check(key in meta, f"manifest list metadata lacks {key}")
    check(meta["snapshot-id"] == str(SNAPSHOT_ID), "snapshot-id")
    check(meta["parent-snapshot-id"] == str(SNAPSHOT_ID - 1), "parent-snapshot-id")
    check(meta["sequence-number"] == "5" and meta["format-version"] == "2", "sequence-number / format-version")

    recs = f["records"]
    check(len(recs) == 1, f"manifest list has {len(recs)} manifests, not 1")
    m = recs[0]
    added = [e for e in manifest_entries if e["status"] == 1]
    expect = {
        "manifest_path": manifest_path,
        "manifest_length": os.path.getsize(manifest_path),
        "partition_spec_id": 0, "content": 0, "sequence_number": 5, "min_sequence_number": 5,
        "added_snapshot_id": SNAPSHOT_ID,
        "added_files_count": len(added), "existing_files_count": 0, "deleted_files_count": 0,
        "added_rows_count": sum(e["data_file"]["record_count"] for e in added),
        "existing_rows_count": 0, "deleted_rows_count": 0,
        "partitions": [{"contains_null": False, "contains_nan": None, "lower_bound": le(19723, 4), "upper_bound": le(19725, 4)}],
        "key_metadata": None,
    }
    check(m == expect, f"manifest_file differs:\n{json.dumps(m, indent=1)}\nexpected\n{json.dumps(expect, indent=1)}")
    check(icebird_records == recs, f"icebird's manifest list differs from avsc's: {icebird_records}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True, help="the avro_write_samples executable")
    ap.add_argument("--skiff", help="unused (the common client-test argument)")
    args = ap.parse_args()
    try:
        for codec in ("null", "deflate"):
            with tempfile.TemporaryDirectory(prefix="skiff-avro-") as d:
                subprocess.run([args.samples, d, codec], check=True, capture_output=True, timeout=60)
                manifest, snap = os.path.join(d, "manifest.avro"), os.path.join(d, "snap.avro")
                p = subprocess.run(["node", os.path.join(HERE, "verify_avro.mjs"), manifest, snap],
                                   capture_output=True, text=True, timeout=120)
                check(p.returncode == 0, f"verify_avro.mjs exited {p.returncode}: {p.stderr[-2000:]}")
                files = json.loads(p.stdout)["files"]
                check(len(files) == 2, "verify_avro.mjs did not decode both files")
                check(all(f["codec"] == codec for f in files), f"codec is not {codec}")
                entries = check_manifest(files[0], files[0]["icebird_records"])
                check_list(files[1], files[1]["icebird_records"], manifest, entries)
                print(f"ok: {codec}: manifest ({len(entries)} entries, {os.path.getsize(manifest)} bytes) and manifest list")
    except (Failure, subprocess.SubprocessError, json.JSONDecodeError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
