"""Python scripts the ``view``, ``edit`` and ``create`` tools run inside the sandbox.

Each reads its arguments as JSON on stdin (no quoting of model text into a command line), works
relative to the repository (its working directory), bounds what it prints, and reports a
model's mistake on stdout with exit code 1. Files are read and written as UTF-8 with undecodable
bytes kept (``surrogateescape``) and line endings untouched.
"""

VIEW = r"""
import json, os, sys
a = json.loads(sys.stdin.read())
path, start, end, limit = a["path"], a["start"], a["end"], a["limit"]
out, size = [], 0
def emit(line):
    global size
    size += len(line) + 1
    if size > limit:
        return False
    out.append(line)
    return True
def listing():
    base = os.path.normpath(path)
    hidden = {".git", "__pycache__", ".pytest_cache"}
    entries = []
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in hidden)
        depth = 0 if root == base else os.path.relpath(root, base).count(os.sep) + 1
        entries += [os.path.join(root, d) + "/" for d in dirs]
        entries += [os.path.join(root, f) for f in sorted(files)]
        if depth >= 1:
            dirs[:] = []
    shown = 0
    for entry in sorted(entries):
        name = entry if os.path.isabs(path) else os.path.relpath(entry)
        if not emit(name + "/" if entry.endswith("/") else name):
            break
        shown += 1
    if shown < len(entries):
        out.append("... (%d more entries; view a subdirectory)" % (len(entries) - shown))
def lines():
    with open(path, "rb") as f:
        data = f.read(8 << 20)
    if b"\0" in data[:8192]:
        out.append("%s is a binary file (%d bytes); it cannot be shown." % (path, len(data)))
        return
    text = data.decode("utf-8", "surrogateescape").splitlines()
    total = len(text)
    first = max(1, start or 1)
    last = total if end is None or end == -1 else min(end, total)
    if total and first > total:
        print("Error: start_line %d is past the end of %s (%d lines)." % (first, path, total))
        sys.exit(1)
    n = first - 1
    for n in range(first, last + 1):
        line = text[n - 1].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        if not emit("%6d\t%s" % (n, line[:2000])):
            n -= 1
            break
    if n < total or first > 1:
        out.append("(lines %d-%d of %d)" % (first, n, total))
if os.path.isdir(path):
    listing()
elif os.path.isfile(path):
    lines()
else:
    print("Error: %s does not exist." % path)
    sys.exit(1)
print("\n".join(out) if out else "(empty)")
"""

EDIT = r"""
import json, os, sys
a = json.loads(sys.stdin.read())
path, old, new = a["path"], a["old_str"], a["new_str"]
def fail(message):
    print("Error: " + message)
    sys.exit(1)
if not os.path.isfile(path):
    fail("%s is not a file; view the directory to find it, or use create." % path)
with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
    text = f.read()
count = text.count(old)
if count == 0:
    hint = ""
    if old.strip() and old.strip() in text:
        hint = " It is there without its leading/trailing whitespace: copy whitespace exactly."
    fail("old_str was not found in %s. View the file and copy the text exactly.%s" % (path, hint))
if count > 1:
    at, i = [], text.find(old)
    while i != -1 and len(at) < 10:
        at.append(str(text.count("\n", 0, i) + 1))
        i = text.find(old, i + 1)
    fail("old_str occurs %d times in %s (at lines %s); include more of the surrounding lines "
         "so that it occurs once." % (count, path, ", ".join(at)))
i = text.find(old)
text = text[:i] + new + text[i + len(old):]
with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
    f.write(text)
first = text.count("\n", 0, i) + 1
last = first + new.count("\n")
shown = text.splitlines()
lo, hi = max(1, first - 3), min(len(shown), last + 3)
print("Edited %s. Lines %d-%d now read:" % (path, lo, hi))
for n in range(lo, hi + 1):
    line = shown[n - 1].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    print("%6d\t%s" % (n, line[:500]))
"""

CREATE = r"""
import json, os, sys
a = json.loads(sys.stdin.read())
path, content, overwrite = a["path"], a["content"], a["overwrite"]
if os.path.isdir(path):
    print("Error: %s is a directory." % path)
    sys.exit(1)
existed = os.path.lexists(path)
if existed and not overwrite:
    print("Error: %s already exists. Use edit to change it, or create with overwrite=true "
          "to replace all of it." % path)
    sys.exit(1)
parent = os.path.dirname(path)
if parent:
    os.makedirs(parent, exist_ok=True)
with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
    f.write(content)
lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
print("%s %s (%d lines)." % ("Replaced" if existed else "Created", path, lines))
"""
