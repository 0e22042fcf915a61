#!/usr/bin/env python3
"""sync_tree.py TAR DEST [KEEP...]: make DEST hold exactly TAR's files (a `git archive` snapshot), touching only what
differs, so that a build directory under DEST (named in KEEP, e.g. build-gpu) stays valid and ninja rebuilds only what
the new snapshot changed.

batch_lib.sh used to delete DEST and unpack the snapshot afresh before every device call. A warm device machine keeps
/tmp between calls, but every file then got a new time stamp and the build started over (130-205 s a call). Here a
file whose bytes are unchanged keeps its old time stamp; a changed or new file is written (and so is newer than what
was built from it); a file no longer in the snapshot is removed. Paths in KEEP (first path components) are never
touched. Prints one line: how many files were written, removed and left as they were."""
import os
import shutil
import sys
import tarfile


def main(tar_path, dest, keep):
    keep = set(keep)
    os.makedirs(dest, exist_ok=True)
    wanted = set()
    written = unchanged = 0
    with tarfile.open(tar_path) as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            if name in (".", "") or name.startswith("..") or os.path.isabs(name):
                continue
            if name.split(os.sep)[0] in keep:
                continue
            path = os.path.join(dest, name)
            if member.isdir():
                os.makedirs(path, exist_ok=True)
                continue
            if not member.isfile():  # git archive writes files, directories and (rarely) symlinks
                if member.issym():
                    wanted.add(name)
                    if not (os.path.islink(path) and os.readlink(path) == member.linkname):
                        if os.path.lexists(path):
                            os.remove(path)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                        os.symlink(member.linkname, path)
                continue
            wanted.add(name)
            data = tar.extractfile(member).read()
            try:
                with open(path, "rb") as f:
                    if f.read() == data:
                        unchanged += 1
                        if (os.stat(path).st_mode & 0o777) != (member.mode & 0o777):
                            os.chmod(path, member.mode & 0o777)
                        continue
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                pass
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, member.mode & 0o777)
            written += 1
    removed = 0
    for root, dirs, files in os.walk(dest, topdown=True):
        rel_root = os.path.relpath(root, dest)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in keep]
            files = [f for f in files if f not in keep]
        for f in files:
            rel = os.path.normpath(os.path.join(rel_root, f))
            if rel not in wanted:
                os.remove(os.path.join(root, f))
                removed += 1
    print(f"sync_tree: {written} written, {removed} removed, {unchanged} unchanged in {dest}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
