# SPDX-License-Identifier: Apache-2.0
# HintedSampler: wraps a sampler, posts each epoch's order to the cluster as an order hint, then yields that order.
"""
DESIGN
A torch DataLoader calls iter(sampler) once per epoch, in the main process, before any worker reads.
HintedSampler.__iter__ takes the wrapped sampler's whole order for the epoch at that moment (a list of
indices, or of batches for a batch sampler), maps every index to its object name, posts the names as
the epoch's order hint, and only then returns an iterator over the very same list: the cluster is told
exactly what the loader reads, in that order, before the first read. The epoch number starts at
`epoch` and goes up by one per iteration (set_epoch() sets it, and passes it on to a sampler that has
set_epoch, as DistributedSampler does).

Nothing here imports torch: any iterable with a length works (torch's samplers, a list, a generator
class). Names come from, in this order of preference: name_of (a callable index -> name, or a
sequence indexed by the index), else the attribute `attr` (default "objnames") of `dataset`, or of the
sampler's data_source when no dataset is given (torch's SequentialSampler and RandomSampler keep the
dataset there); that attribute is again a callable or a sequence.
"""
import operator
import warnings

from .client import FastTierError

ON_ERROR = ("raise", "warn")


class HintedSampler:
    """sampler: the wrapped sampler (yields indices, or lists of indices for a batch sampler);
    client: a fasttier.Client; bucket, provider: the bucket read; name_of / dataset / attr: how an
    index becomes an object name (see the module's notes); epoch: the first epoch's number; job:
    the hint's job name (by default "rank<N>" for a sampler with rank and num_replicas > 1, such as
    DistributedSampler, so that ranks do not replace each other's hints; else the proxy's
    "default"); ttl_s: the hint's lifetime; on_error: "raise" (a refused or failed hint raises
    FastTierError from iter()) or "warn" (a RuntimeWarning, and the epoch runs without a hint).

    last_reply: the proxy's reply to the last hint (None before the first, or after a warned failure)."""

    def __init__(self, sampler, client, bucket, name_of=None, dataset=None, attr="objnames", provider="ais",
                 epoch=0, job=None, ttl_s=None, on_error="raise"):
        if not hasattr(sampler, "__iter__"):
            raise TypeError("sampler must be iterable (a torch.utils.data sampler), not %s" % type(sampler).__name__)
        if not hasattr(client, "post_order_hint"):
            raise TypeError("client must be a fasttier.Client, not %s" % type(client).__name__)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError("epoch must be an int >= 0, not %r" % (epoch,))
        if on_error not in ON_ERROR:
            raise ValueError("on_error must be one of %s, not %r" % (", ".join(ON_ERROR), on_error))
        self.sampler = sampler
        self.client = client
        self.bucket, self.provider = bucket, provider
        self.epoch = epoch
        self.job = job if job is not None else _default_job(sampler)
        self.ttl_s = ttl_s
        self.on_error = on_error
        self.last_reply = None
        self._name_of = _resolve_names(sampler, name_of, dataset, attr)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        """The next iteration posts (and is) this epoch; passed on to the wrapped sampler when it
        has set_epoch (DistributedSampler reshuffles by it)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError("epoch must be an int >= 0, not %r" % (epoch,))
        self.epoch = epoch
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        order = list(iter(self.sampler))
        epoch = self.epoch
        self.epoch += 1
        if order:
            self._post(epoch, self._names(order))
        return iter(order)

    def _names(self, order):
        names = []
        for pos, item in enumerate(order):
            if isinstance(item, (list, tuple)):
                names.extend(self._name(pos, i) for i in item)
            else:
                names.append(self._name(pos, item))
        return names

    def _name(self, pos, item):
        try:
            index = operator.index(item)
        except TypeError:
            raise TypeError("the sampler yielded %s %r at position %d: not an index (nor a batch of them)"
                            % (type(item).__name__, item, pos)) from None
        try:
            name = self._name_of(index)
        except (IndexError, KeyError) as e:
            raise ValueError("no object name for index %d (position %d of the epoch): %s" % (index, pos, e)) from None
        if not isinstance(name, str) or not name:
            raise TypeError("the name of index %d is %r: object names are non-empty str" % (index, name))
        return name

    def _post(self, epoch, names):
        try:
            self.last_reply = self.client.post_order_hint(self.bucket, names, epoch=epoch, provider=self.provider,
                                                          ttl_s=self.ttl_s, job=self.job)
        except FastTierError as e:
            self.last_reply = None
            if self.on_error == "raise":
                raise
            warnings.warn("epoch %d runs without an order hint: %s" % (epoch, e), RuntimeWarning, stacklevel=3)


def _default_job(sampler):
    rank, replicas = getattr(sampler, "rank", None), getattr(sampler, "num_replicas", None)
    if isinstance(rank, int) and isinstance(replicas, int) and replicas > 1:
        return "rank%d" % rank
    return None


def _lookup(source, what):
    """index -> name from a callable or a sequence (what names it in errors)."""
    if callable(source):
        return source
    if hasattr(source, "__getitem__"):
        return source.__getitem__
    raise TypeError("%s must be a callable (index -> name) or a sequence of names, not %s"
                    % (what, type(source).__name__))


def _resolve_names(sampler, name_of, dataset, attr):
    if name_of is not None:
        return _lookup(name_of, "name_of")
    what = "dataset"
    if dataset is None:
        dataset = getattr(sampler, "data_source", None)
        if dataset is None:  # a BatchSampler wraps the sampler that has it
            dataset = getattr(getattr(sampler, "sampler", None), "data_source", None)
        what = "the sampler's data_source"
    if dataset is None:
        raise ValueError("no way to name the indices: pass name_of= (a callable index -> object name, or a "
                         "list of names) or dataset= with an attribute %r" % attr)
    if not hasattr(dataset, attr):
        raise ValueError("%s (%s) has no attribute %r: pass name_of= (a callable index -> object name, or a list "
                         "of names), or attr= naming the attribute that holds the names"
                         % (what, type(dataset).__name__, attr))
    return _lookup(getattr(dataset, attr), "%s.%s" % (type(dataset).__name__, attr))
