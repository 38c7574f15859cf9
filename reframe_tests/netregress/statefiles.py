"""Files that must survive: private state directories, atomic writes, one writer at a time.

Everything netregress keeps across runs (host baselines, ReFrame's results database, committed reference files,
the snapshot manifest of a source mirror) is written through this module:

* :func:`private_dir` creates a state directory ``0700`` and refuses one that is not a plain directory owned by
  this user, or that group or others may write (another local user could have created it first, or swap files
  in it): a :class:`StateError` whose one line names the directory and says what to do.
* :func:`atomic_write` writes a temporary file made by ``mkstemp`` in the target's own directory, flushes and
  fsyncs it, then ``os.replace``\\ s the target and fsyncs the directory: a reader, a kill or a full disk leaves the
  old file or the new one, never a part. A target that is a symbolic link is refused, never written through.
  Its temporary file is named ``.<name>.<pid>.<random>.tmp``; the next writer removes those a killed writer left
  (:func:`remove_leftovers`: its process is gone, or the file is older than :data:`LEFTOVER_AGE_S`).
* :func:`locked` holds ``fcntl.flock`` on ``<dir>/.lock`` for a read-modify-write: concurrent writers queue instead
  of losing each other's changes.
* :func:`sealed` ends a file with a line counting its bytes, :func:`check_sealed` refuses one without it or with
  another count: a file cut at a line boundary is still valid YAML, and would be read as a smaller one.

Standard library only: the Spack helpers import it before the venv exists.
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator

LOCK_NAME = '.lock'


class StateError(Exception):
    """A state directory or file that may not be used or written; the message is one line naming it."""


def check_private(path: Path, what: str = 'state directory') -> None:
    """:class:`StateError` unless ``path`` is a directory (not a symlink) owned by this user and not writable by
    group or others."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise StateError(f'{path}: {what} does not exist') from None
    except OSError as err:          # a parent that is a file, or not searchable by this user
        raise StateError(f'{path}: {what} cannot be used ({err.strerror})') from None
    if stat.S_ISLNK(st.st_mode):
        raise StateError(f'{path}: {what} is a symbolic link (to {os.readlink(path)}): refusing it; '
                         f'give the real directory')
    if not stat.S_ISDIR(st.st_mode):
        raise StateError(f'{path}: {what} is not a directory')
    if st.st_uid != os.geteuid():
        raise StateError(f'{path}: {what} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): '
                         f'someone else made it; use another directory (NETREGRESS_STATE)')
    if st.st_mode & 0o022:
        raise StateError(f'{path}: {what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): '
                         f'chmod 700 it if it is yours, else use another directory')


def private_dir(path: Path, what: str = 'state directory') -> Path:
    """``path`` created ``0700`` when missing (parents as ``mkdir -p`` makes them), checked by :func:`check_private`
    either way. Returns ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as err:
        raise StateError(f'{path}: cannot create the {what} ({err.strerror})') from None
    check_private(path, what)
    return path


def refuse_symlink(path: Path, what: str = 'file') -> None:
    """:class:`StateError` when ``path`` is a symbolic link (a write would go wherever it points)."""
    if os.path.islink(path):
        raise StateError(f'{path}: {what} is a symbolic link (to {os.readlink(path)}): refusing to write through it')


def atomic_write(path: Path, data: str | bytes, mode: int | None = None, what: str = 'file') -> None:
    """Replace ``path`` by ``data`` atomically (module docstring). The new file keeps the old one's mode, else
    ``mode``, else 0644 less the umask. :class:`StateError` (nothing changed) when the write fails."""
    path = Path(path)
    refuse_symlink(path, what)
    directory = path.parent
    if not directory.is_dir():
        raise StateError(f'{path}: the directory of the {what} does not exist')
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
    raw = data.encode() if isinstance(data, str) else data
    remove_leftovers(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.{os.getpid()}.', suffix='.tmp', dir=directory)
    except OSError as err:
        raise StateError(f'{path}: cannot write the {what} ({err.strerror})') from None
    try:
        with os.fdopen(fd, 'wb') as fp:
            fp.write(raw)
            fp.flush()
            os.fsync(fp.fileno())
            os.fchmod(fp.fileno(), mode)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise StateError(f'{path}: cannot write the {what} ({err.strerror}); the old one is intact') from None
        raise
    fsync_dir(directory)


#: A temporary file older than this is a leftover whatever its process id says (the id may have been reused).
LEFTOVER_AGE_S = 600.0


def remove_leftovers(path: Path) -> list[Path]:
    """Remove the temporary files of earlier :func:`atomic_write` calls for ``path`` whose writer was killed: its
    process is gone, or the file is older than :data:`LEFTOVER_AGE_S` (a file of the earlier naming, without a
    process id, by its age alone). Returns what it removed. Writers of one file hold a lock (:func:`locked`), so a
    temporary file of a live writer is another process's only where the process id was reused."""
    path = Path(path)
    pattern = re.compile(rf'\.{re.escape(path.name)}\.(?:(\d+)\.)?[A-Za-z0-9_]+\.tmp')
    removed = []
    now = time.time()
    for tmp in path.parent.glob(f'.{glob.escape(path.name)}.*.tmp'):
        found = pattern.fullmatch(tmp.name)
        if not found:
            continue
        try:
            old = now - os.lstat(tmp).st_mtime > LEFTOVER_AGE_S
            if old or (found[1] is not None and not _alive(int(found[1]))):
                os.unlink(tmp)
                removed.append(tmp)
        except OSError:
            pass                        # gone meanwhile, or not ours to remove: the write goes on
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True                     # another user's process
    return True


#: The last line of a sealed file: how many bytes come before it.
SEAL = '# end of file: {} bytes before this line\n'
_SEAL_RE = re.compile(r'# end of file: (\d+) bytes before this line\n\Z')


def sealed(text: str) -> str:
    """``text`` (ending with a newline) with its seal (:data:`SEAL`) as the last line."""
    return text + SEAL.format(len(text.encode()))


def check_sealed(text: str, path: Path, what: str = 'file') -> str:
    """``text`` without its seal; :class:`StateError` naming ``path`` when the seal is missing (the file was cut)
    or counts other bytes than precede it (cut and something appended, or edited)."""
    found = _SEAL_RE.search(text)
    if found is None:
        raise StateError(f'{path}: truncated {what} (its last line, "# end of file: N bytes ...", is missing): '
                         f'kept as it is, not used; move it away to start a new one')
    body = text[:found.start()]
    size = len(body.encode())
    if size != int(found[1]):
        raise StateError(f'{path}: {what} of {size} bytes where its last line says {found[1]} (cut or edited): '
                         f'kept as it is, not used; move it away to start a new one')
    return body


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort where a file system cannot fsync a directory)."""
    try:
        dirfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dirfd)
    except OSError:
        pass
    finally:
        os.close(dirfd)


@contextlib.contextmanager
def locked(directory: Path, timeout: float | None = None) -> Iterator[Path]:
    """Hold an exclusive ``flock`` on ``<directory>/.lock`` (created 0600, never through a symlink) while the block
    runs; waits for another holder (``timeout`` seconds at most, None: as long as it takes)."""
    lock = Path(directory) / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise StateError(f'{lock}: cannot open the lock file ({err.strerror})') from None
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            end = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > end:
                        raise StateError(f'{lock}: still locked after {timeout:g} s by another writer') from None
                    time.sleep(0.05)
        yield lock
    finally:
        os.close(fd)
