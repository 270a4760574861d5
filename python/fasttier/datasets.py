# SPDX-License-Identifier: Apache-2.0
# torch datasets over a FastTier cluster: whole WebDataset shards per DataLoader worker, and samples by GetBatch.
"""
ShardDataset (an IterableDataset): every DataLoader worker (of every rank) reads whole shards, one
GET each, streamed, and yields their samples: the members of one WebDataset sample key, as
{"__key__": key, "__shard__": shard, ext: bytes, ...} (`0001.jpg` + `0001.cls` -> key "0001",
extensions "jpg" and "cls"). Shards are dealt round robin over rank x worker, so an epoch reads each
shard once over all workers; set_epoch(e) with shuffle=True deals them in another order.

BatchDataset (a map-style Dataset): samples by index, fetched many at a time with one GetBatch
request (POST /v1/batch): use it with a BatchSampler as the DataLoader's sampler and
batch_size=None, so that each worker gets a list of indices and makes one request for all of
them (torch >= 2 calls __getitems__ with the batch, which does the same).

Both take a fasttier.Client or a proxy URL, and a token (else FT_TOKEN from the environment).
"""
import io
import os
import random
import tarfile
import zipfile

import torch.utils.data

from .client import Client, FastTierError

__all__ = ["ShardDataset", "BatchDataset", "sample_key", "samples_of_tar"]


def sample_key(name):
    """The WebDataset sample key of a member name and its extension: the name up to the first "."
    of its last path segment, and the rest ("a/0001.seg.png" -> ("a/0001", "seg.png"))."""
    slash = name.rfind("/") + 1
    dot = name.find(".", slash)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1:]


def _client(client, token):
    if isinstance(client, Client):
        return client
    if isinstance(client, str):
        return Client(client, token=token)
    raise TypeError("client must be a fasttier.Client or a proxy URL, not %s" % type(client).__name__)


def _group(members, shard):
    """(name, bytes) pairs in archive order -> sample dicts, consecutive members of one key together."""
    cur = None
    for name, data in members:
        key, ext = sample_key(name)
        if cur is not None and cur["__key__"] != key:
            yield cur
            cur = None
        if cur is None:
            cur = {"__key__": key, "__shard__": shard}
        cur[ext] = data
    if cur is not None:
        yield cur


def _tar_members(fileobj):
    with tarfile.open(fileobj=fileobj, mode="r|*") as t:
        for m in t:
            if m.isfile():
                yield m.name, t.extractfile(m).read()


def _exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError("the TAR ends inside a record (%d of %d bytes)" % (len(b), n))
    return b


def _octal(field):
    if field[0] & 0x80:  # GNU base-256
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _pax(data):
    """The records of a PAX extended header ("<len> key=value\n" ...) as a dict of str."""
    out, at = {}, 0
    while at < len(data):
        sp = data.index(b" ", at)
        n = int(data[at:sp])
        key, _, value = data[sp + 1:at + n - 1].partition(b"=")
        out[key.decode()] = value.decode("utf-8", "surrogateescape")
        at += n
    return out


def _tar_members_plain(f):
    """(name, bytes) of every regular member of an uncompressed TAR stream, by a header walk that
    checks each header's checksum: the python tarfile module's stream mode costs several times more
    per member. ustar, GNU long names and PAX path/size records."""
    long_name, pax = None, {}
    while True:
        hdr = _exact(f, 512)
        if hdr.count(0) == 512:
            return
        if _octal(hdr[148:156]) != sum(hdr[:148]) + 256 + sum(hdr[156:]):
            raise tarfile.ReadError("bad TAR header checksum")
        kind, size = hdr[156:157], _octal(hdr[124:136])
        if "size" in pax:
            size = int(pax["size"])
        data = _exact(f, size)
        if size % 512:
            _exact(f, 512 - size % 512)
        if kind == b"x":
            pax = _pax(data)
            continue
        if kind == b"L":
            long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            continue
        if kind in (b"0", b"\0", b"7"):
            name = hdr[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if hdr[257:262] == b"ustar" and hdr[345] != 0:
                name = hdr[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape") + "/" + name
            name = pax.get("path") or long_name or name
            yield name, data
        long_name, pax = None, {}


def samples_of_tar(fileobj, shard="", compressed=None):
    """The samples of a TAR (or, compressed=True or a gzip magic when None, TGZ) stream, as
    ShardDataset yields them."""
    if compressed is None:
        fileobj = fileobj if hasattr(fileobj, "peek") else io.BufferedReader(fileobj, 1 << 20)
        compressed = fileobj.peek(2)[:2] == b"\x1f\x8b"
    if compressed:
        return _group(_tar_members(fileobj), shard)
    return _group(_tar_members_plain(fileobj), shard)


def _rank_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class ShardDataset(torch.utils.data.IterableDataset):
    """The samples of the shards of a bucket, each DataLoader worker reading whole shards.

    client: a fasttier.Client or the proxy's URL; bucket, provider: where the shards are; shards:
    their names, or prefix: every object under it whose name ends in .tar, .tgz, .tar.gz or .zip
    (listed once, here); shuffle, seed: deal the shards in a new order each epoch (set_epoch);
    rank, world_size: this process's share (default: torch.distributed when initialized, else the
    RANK and WORLD_SIZE environment variables, else all); token: the access token (default: the
    client's, or FT_TOKEN). Members of one sample must be consecutive in a shard (archive jobs and
    dsort write them so)."""

    EXTS = (".tar", ".tgz", ".tar.gz", ".zip")

    def __init__(self, client, bucket, shards=None, prefix=None, provider="ais", shuffle=False, seed=0, rank=None,
                 world_size=None, token=None):
        super().__init__()
        if (shards is None) == (prefix is None):
            raise ValueError("give shards (a list of names) or prefix, one of them")
        self.client = _client(client, token)
        self.bucket, self.provider = bucket, provider
        if shards is None:
            shards = [e["name"] for e in self.client.list_objects(bucket, prefix=prefix, provider=provider)
                      if e["name"].lower().endswith(self.EXTS)]
        if isinstance(shards, str) or not all(isinstance(s, str) and s for s in shards):
            raise TypeError("shards must be a list of shard names")
        self.shards = list(shards)
        if not self.shards:
            raise ValueError("no shards%s" % (" under prefix %r" % prefix if prefix is not None else ""))
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.rank, self.world_size = rank, world_size

    def set_epoch(self, epoch):
        """The epoch whose shard order the next iteration deals (with shuffle)."""
        self.epoch = epoch

    def my_shards(self):
        """The shards this process's current worker reads this epoch."""
        order = list(self.shards)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        rank, world = _rank_world(self.rank, self.world_size)
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        return order[rank * nw + wid::world * nw]

    def __iter__(self):
        client = self.client.session_for_worker()
        for shard in self.my_shards():
            yield from self._shard(client, shard)

    def _shard(self, client, shard):
        resp = client.get(self.bucket, shard, provider=self.provider, stream=True)
        try:
            if shard.lower().endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(resp.content)) as z:
                    members = [(i.filename, z.read(i)) for i in z.infolist() if not i.is_dir()]
                yield from _group(members, shard)
            else:
                raw = io.BufferedReader(resp.raw, 1 << 20)
                yield from samples_of_tar(raw, shard, compressed=shard.lower().endswith((".tgz", ".gz")))
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            raise FastTierError("GET %s/%s" % (self.bucket, shard), 200, "not a readable shard: %s" % e) from None
        finally:
            resp.close()


class BatchDataset(torch.utils.data.Dataset):
    """Samples by index, read with GetBatch: one request per list of indices.

    samples: a list whose entries are an object name (the sample is its bytes), a (name, archpath)
    pair (a member of a shard: its bytes), or a dict {"__key__": key, ext: name or (name, archpath),
    ...} (the sample is {"__key__": key, ext: bytes, ...}); bucket, provider: where they are.
    from_shards() builds the samples of every WebDataset sample in shards."""

    def __init__(self, client, bucket, samples, provider="ais", token=None):
        super().__init__()
        self.client = _client(client, token)
        self.bucket, self.provider = bucket, provider
        self.samples = list(samples)
        self._pid, self._worker_client = None, None

    @classmethod
    def from_shards(cls, client, bucket, shards, provider="ais", token=None):
        """A BatchDataset of every sample (sample key) in the TAR/ZIP shards, their members read by
        archpath; listed once, here, with the listing's archive=true."""
        client = _client(client, token)
        samples = []
        for shard in shards:
            keyed = {}
            for e in client.list_objects(bucket, prefix=shard + "/", provider=provider, archive=True):
                member = e["name"][len(shard) + 1:]
                key, ext = sample_key(member)
                keyed.setdefault(key, {"__key__": key})[ext] = (shard, member)
            samples.extend(keyed.values())
        return cls(client, bucket, samples, provider)

    def __len__(self):
        return len(self.samples)

    def _client(self):
        if self._pid != os.getpid():  # a worker process: a session of its own
            self._pid, self._worker_client = os.getpid(), self.client.session_for_worker()
        return self._worker_client

    def _item(self, ref):
        name, archpath = (ref, None) if isinstance(ref, str) else ref
        item = {"bucket": self.bucket, "provider": self.provider, "objname": name}
        if archpath is not None:
            item["archpath"] = archpath
        return item

    def __getitem__(self, index):
        if isinstance(index, (list, tuple)):
            return self.__getitems__(index)
        return self.__getitems__([index])[0]

    def __getitems__(self, indices):
        specs = [self.samples[i] for i in indices]
        items, shape = [], []
        for s in specs:
            if isinstance(s, dict):
                exts = [k for k in s if k != "__key__"]
                items.extend(self._item(s[k]) for k in exts)
                shape.append((s.get("__key__"), exts))
            else:
                items.append(self._item(s))
                shape.append(None)
        resp = self._client().get_batch(items)
        try:
            with tarfile.open(fileobj=resp.raw, mode="r|") as t:
                datas = [t.extractfile(m).read() for m in t if m.isfile()]
        finally:
            resp.close()
        if len(datas) != len(items):
            raise FastTierError("POST /v1/batch", 200, "%d members for %d items" % (len(datas), len(items)))
        out, at = [], 0
        for sh in shape:
            if sh is None:
                out.append(datas[at])
                at += 1
            else:
                key, exts = sh
                d = {"__key__": key}
                for ext in exts:
                    d[ext] = datas[at]
                    at += 1
                out.append(d)
        return out
