"""The one reader and the one writer for files of the repository under test (SECURITY.md S13).

Everything in a checkout is attacker-controlled, symlinks included. A committed
``README.md -> /home/runner/.ssh/id_rsa`` or ``.setupbot/run.json -> ~/.bashrc`` must neither be
read into a prompt or a report nor overwritten. So:

- ``read_bytes``/``read_text`` resolve the path, refuse anything that ends up outside the
  repository, open the resolved path component by component with ``O_NOFOLLOW`` (a link swapped
  in after the check is refused too), refuse what is not a regular file (devices, FIFOs,
  sockets) and cap the size.
- ``write_text`` accepts only repository-relative paths under an allowed prefix (the output
  folder, ``.setupbot/``, a few named files), and walks to the file ``openat``-style: every
  folder is opened with ``O_NOFOLLOW|O_DIRECTORY`` relative to the one before, and the file
  itself with ``O_NOFOLLOW``. A symlink anywhere on the way is refused, never followed.
- ``walk`` lists the tree without recursion (a 1,100-level tree is no RecursionError) and
  without following links to folders.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from bot.errors import InputError

# The default size cap of one read; callers that need less ask for less.
MAX_READ = 2 * 1024 * 1024
# Folders deeper than this below the root are not listed (a real project is a few dozen deep).
MAX_DEPTH = 64
RECORDS_DIR = ".setupbot"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class UnsafePath(InputError):
    """A repository path that setupbot refuses to read or write (a link out of the repository,
    a symlinked folder on the way to a write, a device, a file over the size cap)."""


def _root(root: Path | str) -> Path:
    return Path(root).resolve()


def _clean_rel(rel: str) -> list[str]:
    """The components of a repository-relative path, refusing absolute paths and '..'."""
    text = str(rel).replace("\\", "/")
    if not text or text.startswith("/") or "\x00" in text:
        raise UnsafePath(f"{rel!r} is not a path inside the repository")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise UnsafePath(f"{rel!r} is not a path inside the repository")
    return parts


def inside(root: Path | str, path: Path | str) -> bool:
    """True when ``path`` (following every link) stays inside ``root``."""
    base = _root(root)
    try:
        return Path(path).resolve().is_relative_to(base)
    except (OSError, RuntimeError, ValueError):
        return False


def _open_dirs(root_fd: int, parts: Iterable[str], *, create: bool) -> int:
    """Open (and with ``create`` make) each folder below ``root_fd`` without following links."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(
                        f"{part!r} on the way is a symlink or not a folder; setupbot does not follow it"
                    ) from exc
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(root: Path | str, rel: str, *, max_bytes: int = MAX_READ, head: bool = False) -> bytes:
    """The bytes of a repository file. Raises FileNotFoundError when it is absent and
    UnsafePath when it leads out of the repository, is not a regular file, or is larger than
    ``max_bytes`` (with ``head`` the first ``max_bytes`` are returned instead)."""
    base = _root(root)
    _clean_rel(rel)
    try:
        target = (base / rel).resolve(strict=True)  # FileNotFoundError when absent
    except RuntimeError:  # a symlink loop
        raise UnsafePath(f"{rel} is a symlink loop; not read") from None
    try:
        parts = list(target.relative_to(base).parts)
    except ValueError:
        raise UnsafePath(f"{rel} is a symlink that points outside the repository; not read") from None
    if not parts:
        raise UnsafePath(f"{rel} is the repository itself, not a file")
    root_fd = os.open(base, _DIR_FLAGS)
    try:
        dir_fd = _open_dirs(root_fd, parts[:-1], create=False)
    finally:
        os.close(root_fd)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(
            parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{rel} changed into a symlink while being read; not read") from exc
        raise
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{rel} is not a regular file (device, FIFO or socket); not read")
        if st.st_size > max_bytes and not head:
            raise UnsafePath(f"{rel} is larger than {max_bytes} bytes ({st.st_size}); not read")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        if not head:
            raise UnsafePath(f"{rel} is larger than {max_bytes} bytes; not read")
        data = data[:max_bytes]
    return data


def read_text(
    root: Path | str, rel: str, *, max_bytes: int = MAX_READ, head: bool = False, errors: str = "replace"
) -> str:
    return read_bytes(root, rel, max_bytes=max_bytes, head=head).decode("utf-8", errors)


def try_read_text(
    root: Path | str, rel: str, *, max_bytes: int = MAX_READ, head: bool = False, warnings: list[str] | None = None
) -> str | None:
    """``read_text``, or None when the file is absent or refused (the refusal goes to
    ``warnings`` when given). For the readers that treat a file as optional evidence."""
    try:
        return read_text(root, rel, max_bytes=max_bytes, head=head)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except UnsafePath as exc:
        if warnings is not None:
            warnings.append(exc.what)
        return None
    except OSError as exc:
        if warnings is not None:
            warnings.append(f"{rel}: cannot read ({exc.strerror or exc})")
        return None


def is_file(root: Path | str, rel: str) -> bool:
    """A regular file inside the repository (links followed only while they stay inside)."""
    path = _root(root) / rel
    return inside(root, path) and path.is_file()


def _allowed(parts: list[str], allowed: Iterable[str]) -> bool:
    path = "/".join(parts)
    for prefix in allowed:
        p = posixpath.normpath(str(prefix)).strip("/")
        if p and (path == p or path.startswith(p + "/")):
            return True
    return False


def _open_parent(root: Path | str, rel: str, allowed: Iterable[str], *, create: bool) -> tuple[Path, list[str], int]:
    """The repository root, ``rel``'s parts and an open descriptor of its folder (made on the
    way with ``create``), for a write or a removal in one of the ``allowed`` places."""
    base = _root(root)
    parts = _clean_rel(rel)
    if not _allowed(parts, allowed):
        raise UnsafePath(f"{rel} is outside the places setupbot writes ({', '.join(allowed)})")
    root_fd = os.open(base, _DIR_FLAGS)
    try:
        return base, parts, _open_dirs(root_fd, parts[:-1], create=create)
    finally:
        os.close(root_fd)


def write_text(root: Path | str, rel: str, text: str, *, allowed: Iterable[str], append: bool = False) -> Path:
    """Write ``text`` to ``rel`` under the repository ``root``. ``allowed`` names the folders (and
    single files) setupbot may write; anything else, and any symlink on the way, is refused."""
    base, parts, dir_fd = _open_parent(root, rel, allowed, create=True)
    try:
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{rel} is a symlink or not a regular file; setupbot does not write through it")
        if append:
            # O_NONBLOCK: a FIFO swapped in fails (ENXIO) instead of blocking the run
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
            try:
                fd = os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENXIO):
                    raise UnsafePath(f"{rel} is a symlink or a FIFO; setupbot does not write through it") from exc
                raise
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode) or os.fstat(fh.fileno()).st_nlink > 1:
                    raise UnsafePath(f"{rel} is not a plain file; setupbot does not write to it")
                fh.write(text)
        else:
            # a new file renamed over the old name: a hard link to a host file keeps its content
            # (the name is replaced, the linked inode is never opened), and no reader sees half a file
            tmp = f".{parts[-1]}.setupbot-{os.urandom(4).hex()}.tmp"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                0o644,
                dir_fd=dir_fd,
            )
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except OSError:
                    pass
                raise
    finally:
        os.close(dir_fd)
    return base.joinpath(*parts)


def remove(root: Path | str, rel: str, *, allowed: Iterable[str]) -> None:
    """Remove the regular file ``rel`` under ``root`` when it is there. ``allowed`` as for
    ``write_text``; a symlink on the way or in its place is refused, never followed."""
    try:
        _, parts, dir_fd = _open_parent(root, rel, allowed, create=False)
    except FileNotFoundError:
        return
    try:
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{rel} is a symlink or not a regular file; setupbot does not remove it")
        os.unlink(parts[-1], dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def walk(
    root: Path | str, *, skip_dirs: Iterable[str] = (), max_depth: int = MAX_DEPTH, warnings: list[str] | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """Like ``os.walk`` top-down (callers may prune ``dirnames`` in place), relative to ``root``
    and sorted, but with an explicit stack instead of recursion, never following links to
    folders, and stopping at ``max_depth``. Symlinks (to files or folders) appear in filenames;
    the reader decides whether they stay inside."""
    base = _root(root)
    skip = set(skip_dirs)
    stack: list[tuple[str, int]] = [("", 0)]
    warned_depth = False
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(base / rel if rel else base) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        dirnames: list[str] = []
        filenames: list[str] = []
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in skip:
                        dirnames.append(e.name)
                else:
                    filenames.append(e.name)
            except OSError:
                continue
        yield rel, dirnames, filenames
        if depth + 1 > max_depth:
            if dirnames and not warned_depth and warnings is not None:
                warnings.append(f"{rel}: folders deeper than {max_depth} levels were not scanned")
                warned_depth = True
            continue
        for d in reversed(dirnames):
            stack.append((f"{rel}/{d}" if rel else d, depth + 1))


def glob_files(root: Path | str, predicate, *, skip_dirs: Iterable[str] = (), limit: int = 20000) -> list[str]:
    """Repository-relative paths of the files for which ``predicate(rel)`` holds (sorted walk
    order, at most ``limit``): the non-recursive stand-in for ``Path.rglob``."""
    out: list[str] = []
    for rel, _dirs, files in walk(root, skip_dirs=skip_dirs):
        for name in files:
            path = f"{rel}/{name}" if rel else name
            if predicate(path):
                out.append(path)
                if len(out) >= limit:
                    return out
    return out
