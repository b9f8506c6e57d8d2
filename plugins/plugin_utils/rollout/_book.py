# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The book of slots of one activation run, and its file on the controller.

:class:`Book` is what the action plugin ``fleetos.layering.os_activate_slot`` and the strategy
``fleetos.layering.slots`` hold: a book's data (a JSON-serialisable mapping), and the methods that read and
change it. Its methods are the only writers; the rules they apply (who gets a slot, what a host's record says,
when the run stops) are plugin_utils/rollout/_slots.py's, pure functions of the data and ``now``.

The file: every fork of the run reads and writes the book under an exclusive file lock (:meth:`Book.locked`),
so the forks share one counting semaphore per pool; the strategy reads it without the lock (:meth:`Book.read`):
every write replaces the file whole. The book's file holds what changes and concerns the whole run (the grants,
the failures, the stop); beside it, in ``<book>.d``, are what does not change once written (the order, each
host's pool, the budgets: :data:`STATIC`, read once per process), each pool's host entries (:class:`PoolFiles`),
and what only one host's steps read (its activation record, what op acquire was given for it:
:class:`HostFiles`). A step of one host then reads and writes its pool's hosts and a few names per host of the
fleet, not every host's state.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import MutableMapping

from ansible_collections.fleetos.layering.plugins.module_utils._files import replace_file
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._resume import process_start
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._slots import SlotError


class Book:
    """One run's book of slots: its data, the path of its file (None until written), and every read and change
    of it. A book as read stays as read: read it again (or lock it) for a later version."""

    def __init__(self, data, path=None):
        self._data = data
        self.path = path
        self._holding = None

    # -- opening and closing -------------------------------------------------------------

    @classmethod
    def new(cls, hosts, budgets, max_failures, canary=0, now=0.0, settle=_slots.SETTLE):
        """A new book (see _slots.new_book()), not written yet."""
        return cls(_slots.new_book(hosts, budgets, max_failures, canary, now, settle))

    def create_file(self, directory=None, owner=None):
        """Write the book to a new file (see create_book_file()): -> its path."""
        self.path = create_book_file(self._data, directory, owner)
        return self.path

    @classmethod
    def read(cls, path):
        """The book as last written, without the lock."""
        return cls(_load(path)[0], path)

    @classmethod
    @contextlib.contextmanager
    def locked(cls, path):
        """The book under an exclusive lock; what the block changes is written back at its end."""
        with _locked_data(path) as data:
            yield cls(data, path)

    @staticmethod
    def remove(path):
        """Remove the book's file, its lock, its hosts' files and its directory."""
        remove_book_file(path)

    @property
    def data(self):
        """The book's mapping, for a look at what no method reads (tests, benches). Change it through the methods."""
        return self._data

    # -- the hosts -----------------------------------------------------------------------

    def __contains__(self, host):
        return host in self._data["hosts"]

    @property
    def order(self):
        """The hosts in rollout order."""
        return self._data["order"]

    @property
    def canary(self):
        """The hosts of the canary batch."""
        return self._data["canary"]

    @property
    def stop(self):
        """Why the run stopped granting slots, or None."""
        return self._data["stop"]

    @property
    def canary_verified(self):
        """Whether the canary batch was verified and the run ended after it (stop_after_canary)."""
        return bool(self._data["canary_verified"])

    def state(self, host):
        """The host's state (_slots.STATES), or None for a host not of the book."""
        entry = self._data["hosts"].get(host)
        return entry["state"] if entry else None

    def pool(self, host):
        """The host's pool."""
        return _slots.host_entry(self._data, host)["pool"]

    def goes_first(self, host):
        """Whether the host goes first in its pool (a host a killed run rebooted)."""
        return bool(_slots.host_entry(self._data, host).get("first"))

    def next_step(self, host):
        """The hook the host's activation stopped before (its next step), or None."""
        return _slots.host_entry(self._data, host).get("next")

    def config(self, host):
        """What op acquire was given for the host (a copy), or an empty mapping."""
        return dict(self._data["activations"].get(host) or {})

    def record(self, host, required=True):
        """The host's activation record (os_activate_result): an error without one, or None when not ``required``."""
        if not required:
            return self._data["records"].get(host)
        return _slots.record_of(self._data, host)

    def fleetlock_holders(self):
        """The hosts of the book that hold a FleetLock slot, in rollout order."""
        return [h for h in self.order if self._data["hosts"][h].get("locked")]

    def holds_fleetlock(self, host):
        """Whether the host holds a FleetLock slot."""
        return bool(_slots.host_entry(self._data, host).get("locked"))

    def holding(self):
        """The hosts that hold a slot, in rollout order (worked out once per book as read)."""
        if self._holding is None:
            self._holding = [h for h in self.order if self._data["hosts"][h]["state"] == "holding"]
        return self._holding

    def slot_count(self):
        """How many slots the pools can hold at once: each pool's budget, at most its hosts."""
        pools = {}
        for pool in self._data["pool_of"].values():
            pools[pool] = pools.get(pool, 0) + 1
        return sum(min(count, self._data["pools"][pool]["budget"]) for pool, count in pools.items())

    def holders(self, pool):
        """The hosts that hold a slot of ``pool``, lost ones included, in rollout order."""
        return _slots.holders(self._data, pool)

    def free_slots(self, pool):
        """The slots of ``pool`` no host holds."""
        return _slots.free_slots(self._data, pool)

    def park_reason(self, host, running):
        """Why the host should wait off the forks before it asks for a slot, or None (_slots.park_reason())."""
        return _slots.park_reason(self._data, host, running)

    def pool_parks(self, pool, running):
        """Whether every host of ``pool`` about to ask is parked (_slots.pool_parks())."""
        return _slots.pool_parks(self._data, pool, running)

    def lease_can_wait(self, host):
        """Whether the host may write its rollout lease later (_slots.lease_can_wait())."""
        return _slots.lease_can_wait(self._data, host)

    def wakes_at(self, host):
        """When the host's parked boot wait may run, or None."""
        return _slots.wakes_at(self._data, host)

    def summary(self):
        """os_activate_summary (_slots.summary())."""
        return _slots.summary(self._data)

    def most_held(self):
        """Pool -> the most slots held at once."""
        return _slots.most_held(self._data)

    # -- the changes ---------------------------------------------------------------------

    def try_acquire(self, host, now, take=True, activation_seconds=0):
        """Ask for a slot of the host's pool: -> (answer, reason) (_slots.try_acquire())."""
        return _slots.try_acquire(self._data, host, now, take, activation_seconds)

    def give_back(self, host, reason, now, stop=None):
        """The host will not activate: free the slot it got (_slots.give_back())."""
        _slots.give_back(self._data, host, reason, now, stop)

    def decline(self, host, reason, now):
        """The host cannot be activated as asked: not activated, no failure (_slots.decline())."""
        _slots.decline(self._data, host, reason, now)

    def drop(self, host, reason, now, failed=False):
        """The host will not ask for a slot (_slots.drop()); -> why the run stopped, or None."""
        _slots.drop(self._data, host, reason, now, failed)
        return self.stop

    def close_canary(self, stop_after=False):
        """The canary batch is over: -> the stop reason, or None (_slots.close_canary())."""
        return _slots.close_canary(self._data, stop_after)

    def start(self, host, config):
        """The host got its slot: keep what op acquire was given for it, for the steps that follow."""
        _slots.host_entry(self._data, host)["next"] = None
        self._data["activations"][host] = config

    def stop_before(self, host, hook):
        """The host's activation stops before ``hook`` (None: at no hook): -> its record."""
        _slots.host_entry(self._data, host)["next"] = hook
        return self.record(host)

    def lock_fleetlock(self, host, locked):
        """Whether the host holds a FleetLock slot now."""
        _slots.host_entry(self._data, host)["locked"] = bool(locked)

    def keep_fleetlock(self, host):
        """FleetLock did not answer the host's steady-state: its record says its FleetLock slot stays taken."""
        record = self.record(host)
        before = record.get("reason") or "verified on the target digest"
        record.update(fleetlock_held=True, reason="%s; FleetLock did not answer its steady-state, so its FleetLock"
                      " slot stays taken until FleetLock answers" % before)

    def new_record(self, host, mode, target_digest, old_digest=None, fleetlock=False):
        """Start the record of a host that was granted a slot (_slots.new_record())."""
        return _slots.new_record(self._data, host, mode, target_digest, old_digest, fleetlock)

    def record_activation(self, host, kind, reason=None):
        """How the host reboots into its target (_slots.record_activation())."""
        return _slots.record_activation(self._data, host, kind, reason)

    def record_event(self, host, event, now, status=None):
        """Record an event of the host's activation (_slots.record_event())."""
        return _slots.record_event(self._data, host, event, now, status)

    def record_failure(self, host, task, result, now, **kwargs):
        """Record that the host's activation failed: -> (record, roll_back) (_slots.record_failure())."""
        return _slots.record_failure(self._data, host, task, result, now, **kwargs)

    def park_boot(self, host, sent, now=None):
        """The host's reboot command ran: its boot wait waits off the forks (_slots.park_boot())."""
        _slots.park_boot(self._data, host, sent, now)

    def unpark_boot(self, host):
        """The reboot park_boot() kept for the host, taken out of the book, or None."""
        return _slots.unpark_boot(self._data, host)

    def release(self, host, now):
        """The host is done: free its slot unless its record keeps it (_slots.release()); -> its record."""
        return _slots.release(self._data, host, now)


# --- the book's file ------------------------------------------------------------------

def create_book_file(book, directory=None, owner=None):
    """Write ``book`` to a new file, private to this user, in a new private directory: -> its path.

    The directory's name carries ``owner``, the process of the run (ansible-playbook); the books
    of this user's runs whose process is gone (killed before they closed their book) are removed.
    """
    owner = int(owner if owner is not None else os.getppid())
    remove_stale_books(directory)
    folder = tempfile.mkdtemp(prefix="fleetos-slots-%d-" % owner, dir=directory)
    path = os.path.join(folder, "book.json")
    _write_new(path, book)
    return path


def remove_stale_books(directory=None):
    """Remove this user's book directories whose run's process is gone: -> their names."""
    directory = directory or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in sorted(names):
        parts = name.split("-")
        # fleetos-slots-<pid>-<random>; older books without a process id are left alone.
        if not name.startswith("fleetos-slots-") or len(parts) < 4 or not parts[2].isdigit():
            continue
        folder = os.path.join(directory, name)
        try:
            if os.lstat(folder).st_uid != os.geteuid() or process_start(parts[2]) is not None:
                continue
        except OSError:
            continue
        remove_book_file(os.path.join(folder, "book.json"))
        if not os.path.exists(folder):
            removed.append(name)
    return removed


# The book's mappings kept as a file per host: (key in the book, letter of the files, key of the hosts that have one).
SIDE = (("records", "r", "recorded"), ("activations", "a", "activated"))


def _dumps(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _write_changed(folder, values, texts, file_of, prefix):
    """Write each of ``values`` (key -> value) whose text is not its text in ``texts`` (key -> the text read or
    written last) to its file, ``file_of(key)`` in ``folder``: -> their keys."""
    changed = []
    for key, value in values.items():
        text = _dumps(value)
        if text != texts.get(key):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            replace_file(file_of(key), text.encode(), prefix=prefix)
            texts[key] = text
            changed.append(key)
    return changed


def _read_json(name, what):
    """-> (the value of the JSON file ``name``, its text); SlotError naming ``what`` when it cannot be read."""
    try:
        with open(name) as handle:
            text = handle.read()
        return json.loads(text), text
    except (OSError, ValueError) as exc:
        raise SlotError("%s cannot be read: %s" % (what, exc))


class HostFiles(MutableMapping):
    """One of the book's mappings of host to entry (its records, what op acquire was given for each host), kept as
    a file per host in ``<book>.d`` (``<letter><place in the book's order>.json``). A host's entry is read when a
    step first asks for it; :meth:`save` writes what the step changed. ``names``: the hosts that have a file."""

    def __init__(self, folder, letter, order, names=(), loaded=None):
        self._folder, self._letter, self._order = folder, letter, order
        self._names = set(names)
        self._place = None
        #: The entries read or set by this step: host -> entry.
        self.loaded = dict(loaded or {})
        self._texts = {}

    def _file(self, host):
        if self._place is None:
            self._place = {name: index for index, name in enumerate(self._order)}
        return os.path.join(self._folder, "%s%d.json" % (self._letter, self._place[host]))

    def __contains__(self, host):
        return host in self.loaded or host in self._names

    def __getitem__(self, host):
        if host not in self.loaded:
            if host not in self._names:
                raise KeyError(host)
            self.loaded[host], self._texts[host] = _read_json(self._file(host), "the slot book's file of %s" % host)
        return self.loaded[host]

    def __setitem__(self, host, entry):
        self.loaded[host] = entry

    def __delitem__(self, host):
        raise SlotError("an entry of the slot book is not removed (%s)" % host)

    def __iter__(self):
        return iter(sorted(self._names | set(self.loaded)))

    def __len__(self):
        return len(self._names | set(self.loaded))

    def save(self):
        """Write each entry this step changed to its file (the book's file is written after them); -> the sorted
        names of the hosts that have one."""
        self._names.update(_write_changed(self._folder, self.loaded, self._texts, self._file, ".side-"))
        return sorted(self._names)


class PoolFiles(MutableMapping):
    """The book's host entries (host -> its state in the book), kept as a file per pool in ``<book>.d``
    (``p<place of the pool among the book's pools, sorted>.json``). A pool's file is read when a step first asks for
    one of its hosts, so that a step of one host reads and writes its pool's hosts, not the fleet's; :meth:`save`
    writes the pools the step changed. ``pool_of``: host -> pool, in rollout order; ``pools``: the book's pools (both
    of the book's static part)."""

    def __init__(self, folder, pool_of, pools, loaded=None):
        self._folder, self._pool_of = folder, pool_of
        self._places = {pool: index for index, pool in enumerate(sorted(pools))}
        self._pools = {}
        self._texts = {}
        for host, entry in (loaded or {}).items():
            self._pools.setdefault(pool_of[host], {})[host] = entry

    def _file(self, pool):
        return os.path.join(self._folder, "p%d.json" % self._places[pool])

    def _pool(self, pool):
        if pool not in self._pools:
            self._pools[pool], self._texts[pool] = _read_json(self._file(pool), "the slot book's file of pool %s" % pool)
        return self._pools[pool]

    def __contains__(self, host):
        return host in self._pool_of

    def __getitem__(self, host):
        return self._pool(self._pool_of[host])[host]

    def __setitem__(self, host, entry):
        self._pool(self._pool_of[host])[host] = entry

    def __delitem__(self, host):
        raise SlotError("a host is not removed from the slot book (%s)" % host)

    def __iter__(self):
        return iter(self._pool_of)

    def __len__(self):
        return len(self._pool_of)

    def save(self, written):
        """Write each pool this step changed to its file (the book's file is written after them): -> ``written``
        (pool -> how many times its file was written) with theirs counted, which goes into the book's file, so
        that every change of a pool changes the book's file too."""
        written = dict(written or {})
        for pool in _write_changed(self._folder, self._pools, self._texts, self._file, ".pool-"):
            written[pool] = written.get(pool, 0) + 1
        return written


# The book's keys that do not change once it is written (its static part, read once per process and file).
STATIC = ("version", "opened_at", "order", "pool_of", "pools", "max_failures", "canary", "settle")
# The static parts read by this process: file -> (its identity, the part).
_STATIC_READ = {}


def _side_folder(path):
    return path + ".d"


def _static_file(path):
    return os.path.join(_side_folder(path), "s.json")


def _static(path):
    """The book's static part, read once per process and file (a worker forked after the strategy read it has it)."""
    name = _static_file(path)
    try:
        stat = os.stat(name)
    except OSError as exc:
        raise SlotError("the slot book %s cannot be read: %s" % (path, exc))
    identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    cached = _STATIC_READ.get(name)
    if cached and cached[0] == identity:
        return cached[1]
    static = _read_json(name, "the slot book %s" % path)[0]
    if len(_STATIC_READ) > 8:
        _STATIC_READ.clear()
    _STATIC_READ[name] = (identity, static)
    return static


def _text(book, path):
    """The text of the book's file (its changing part); the pools' and the per-host mappings' changed entries are
    written to their files first."""
    # A key that starts with _ is worked out from the others when the book is read (members()), not written.
    shared = dict((key, value) for key, value in book.items() if not key.startswith("_") and key not in STATIC)
    shared["version"] = book["version"]
    hosts = shared.pop("hosts")
    if not isinstance(hosts, PoolFiles):
        hosts = PoolFiles(_side_folder(path), book["pool_of"], book["pools"], loaded=hosts)
    shared["pools_written"] = hosts.save(book.get("pools_written"))
    for key, letter, names in SIDE:
        files = shared.pop(key, None)
        if not isinstance(files, HostFiles):
            files = HostFiles(_side_folder(path), letter, book["order"], loaded=files)
        shared[names] = files.save()
    shared["failed"] = sorted(_slots.failed_names(book))
    return _dumps(shared)


def _write(path, book, text=None):
    replace_file(path, (text if text is not None else _text(book, path)).encode(), prefix=".book-")


def _write_new(path, book):
    """Write a new book: its static part, its pools, then its file."""
    os.makedirs(_side_folder(path), mode=0o700, exist_ok=True)
    replace_file(_static_file(path), _dumps(dict((key, book[key]) for key in STATIC)).encode(), prefix=".static-")
    _write(path, book)


def _load(path):
    """-> (the book, its text as written); its pools' and per-host mappings' entries read from their files when
    asked for."""
    shared, text = _read_json(path, "the slot book %s" % path)
    if not isinstance(shared, dict) or shared.get("version") != _slots.VERSION:
        raise SlotError("the slot book %s is not a book of this collection's version" % path)
    book = dict(_static(path))
    book.update(shared)
    book["hosts"] = PoolFiles(_side_folder(path), book["pool_of"], book["pools"])
    for key, letter, names in SIDE:
        book[key] = HostFiles(_side_folder(path), letter, book["order"], book.pop(names, ()))
    return book, text


@contextlib.contextmanager
def _locked_data(path):
    """Read the book's data under an exclusive lock; what the block changes is written back."""
    try:
        lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SlotError("the slot book %s cannot be locked: %s" % (path, exc.strerror))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        book, before = _load(path)
        yield book
        # Written as it was read (every write is _text's): unchanged when the text is the same.
        after = _text(book, path)
        if after != before:
            _write(path, book, after)
    finally:
        os.close(lock)


def remove_book_file(path):
    """Remove the book, its lock, its hosts' files and its directory (when the directory is the book's own)."""
    shutil.rmtree(_side_folder(path), ignore_errors=True)
    for name in (path, path + ".lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
    folder = os.path.dirname(path)
    if os.path.basename(folder).startswith("fleetos-slots-"):
        with contextlib.suppress(OSError):
            os.rmdir(folder)
