#!/usr/bin/env python3
"""Writes skiff(1) from the binary's own help text, so the man page cannot drift from it.

    gen_manpage.py SKIFF OUT [--version V]

`skiff --help` lists the commands (the lines under "commands:", the first word of each is the
command); each command's `skiff CMD --help` becomes a section of the page, kept verbatim in a
no-fill block (help text is laid out for a terminal already). A command whose help cannot be read
fails the build: a man page with a hole is worse than none.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys


def run_help(skiff, args):
    # The help text must not depend on the caller's SKIFF_* settings or terminal width.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIFF_")}
    env["COLUMNS"] = "100"
    p = subprocess.run([skiff, *args, "--help"], capture_output=True, text=True, env=env, timeout=30)
    text = p.stdout if p.stdout.strip() else p.stderr
    if not text.strip():
        sys.exit(f"gen_manpage: `skiff {' '.join(args)} --help` exited {p.returncode} with no help text")
    return text.rstrip("\n")


def commands_of(top_help):
    """The command names listed under 'commands:' (or 'Subcommands:' as CLI11 prints it)."""
    names, inside, indent = [], False, None
    for line in top_help.splitlines():
        if re.match(r"^\s*(commands|subcommands)\s*:\s*$", line, re.I):
            inside = True
            continue
        if inside:
            if not line.strip():
                if names:
                    break
                continue
            if not line.startswith((" ", "\t")):
                break
            # A command starts at the block's first indentation; deeper lines continue a description.
            this_indent = len(line) - len(line.lstrip())
            if indent is None:
                indent = this_indent
            if this_indent != indent:
                continue
            word = line.split()[0]
            if re.fullmatch(r"[a-z][a-z0-9-]*", word) and word not in ("help", "version") and word not in names:
                names.append(word)
    return names


def roff_escape(line):
    line = line.replace("\\", "\\e")
    # A line starting with . or ' would be read as a request.
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def block(text):
    return ".nf\n" + "\n".join(roff_escape(l) for l in text.splitlines()) + "\n.fi"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("skiff")
    ap.add_argument("out")
    ap.add_argument("--version", default="")
    a = ap.parse_args()

    top = run_help(a.skiff, [])
    cmds = commands_of(top)
    if not cmds:
        sys.exit("gen_manpage: `skiff --help` lists no commands")
    # SOURCE_DATE_EPOCH keeps the page reproducible when packagers set it.
    when = datetime.datetime.fromtimestamp(int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or
                                           datetime.datetime.now().timestamp(), datetime.timezone.utc)
    out = [
        f'.TH SKIFF 1 "{when:%Y-%m-%d}" "skiff {a.version}" "User Commands"',
        ".SH NAME",
        "skiff \\- a Kafka-protocol broker whose log lives in S3, and its operator commands",
        ".SH SYNOPSIS",
        ".B skiff",
        ".I command",
        "[\\fIflags\\fR]",
        ".SH DESCRIPTION",
        "skiff serves the Kafka protocol; brokers are stateless and the log lives in S3 (or a local",
        "directory). Existing Kafka clients work against it unchanged. The commands below administer",
        "it and any other Kafka-compatible broker.",
        block(top),
        ".SH COMMANDS",
    ]
    for c in cmds:
        out += [f".SS skiff {c}", block(run_help(a.skiff, [c]))]
    out += [
        ".SH ENVIRONMENT",
        "Every flag of",
        ".B skiff serve",
        "can also be set as an environment variable: \\fB--segment-bytes\\fR is \\fBSKIFF_SEGMENT_BYTES\\fR.",
        "A flag given on the command line wins over the environment. S3 credentials come from",
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or ~/.aws (AWS_PROFILE).",
        ".SH FILES",
        ".TP",
        ".I /etc/skiff/skiff.env",
        "settings of the systemd service (skiff.service), as SKIFF_* variables",
        ".TP",
        ".I /var/lib/skiff",
        "the service's data directory when the log is kept locally",
        ".SH SEE ALSO",
        "The documentation in the source tree: README.md, docs/broker.md, docs/cluster.md,",
        "docs/observability.md.",
        "",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
