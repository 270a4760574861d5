# SPDX-License-Identifier: Apache-2.0
# PyTorch DataLoader over the S3 API: map-style Dataset on a bucket prefix, boto3 client per worker, 2 workers, shuffle, 2 epochs.
"""
The Dataset is the one docs/pytorch.md shows. Every object is generated here, PUT through the S3 API,
and every byte read back by the DataLoader workers is compared with what was PUT.
"""
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

import s3util

try:
    import torch
    from torch.utils.data import DataLoader, Dataset
except ImportError:  # a missing dependency fails the suite, it is not skipped
    pytest.fail("python3-torch is not installed: run `make deps` (scripts/deps.sh)", pytrace=False)

N_OBJECTS = 1000
EPOCHS = 2


class S3Dataset(Dataset):
    """Map-style dataset over the objects of an S3 bucket under a prefix.

    Lists the keys once (in the main process); each DataLoader worker creates its own boto3
    client on first use, since clients must not cross a fork."""

    def __init__(self, endpoint, bucket, prefix, access_key, secret_key, region="us-east-1"):
        import boto3
        self.endpoint, self.bucket = endpoint, bucket
        self.creds = dict(aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=region)
        s3 = boto3.client("s3", endpoint_url=endpoint, **self.creds)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        self.keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        self._s3 = None
        self._pid = None

    def _client(self):
        if self._s3 is None or self._pid != os.getpid():
            import boto3
            self._s3 = boto3.client("s3", endpoint_url=self.endpoint, **self.creds)
            self._pid = os.getpid()
        return self._s3

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        key = self.keys[i]
        body = self._client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return key, torch.frombuffer(bytearray(body), dtype=torch.uint8)


def collate(batch):
    """Objects differ in size: keep them as a list instead of stacking."""
    return batch


def test_dataloader_two_workers_two_epochs(cluster):
    ak, sk = s3util.keys(cluster)
    s3 = s3util.client(cluster)
    bucket = s3util.bucket_name("torch")
    s3.create_bucket(Bucket=bucket)
    expected = {}

    def put(i):
        # Sizes 1 B .. ~20 KiB, content unique per object.
        size = 1 + (i * 7919) % 20000
        data = hashlib.sha256(b"%d" % i).digest() * (size // 32 + 1)
        data = data[:size]
        key = "train/shard-%02d/sample-%04d.bin" % (i % 10, i)
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        return key, hashlib.sha256(data).hexdigest(), size

    try:
        with ThreadPoolExecutor(8) as ex:
            for key, digest, size in ex.map(put, range(N_OBJECTS)):
                expected[key] = (digest, size)
        s3.put_object(Bucket=bucket, Key="other/not-in-prefix", Body=b"x")

        ds = S3Dataset(s3util.endpoint(cluster), bucket, "train/", ak, sk)
        assert len(ds) == N_OBJECTS
        assert sorted(ds.keys) == sorted(expected)
        loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, collate_fn=collate,
                            persistent_workers=False)
        orders = []
        for epoch in range(EPOCHS):
            seen = []
            for batch in loader:
                for key, tensor in batch:
                    digest, size = expected[key]
                    assert tensor.numel() == size, key
                    assert hashlib.sha256(tensor.numpy().tobytes()).hexdigest() == digest, key
                    seen.append(key)
            assert sorted(seen) == sorted(expected), "epoch %d did not read every object exactly once" % epoch
            orders.append(seen)
        assert orders[0] != orders[1], "shuffle gave the same order twice"
        assert orders[0] != sorted(orders[0])
    finally:
        keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                for o in p.get("Contents", [])]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})
        s3.delete_bucket(Bucket=bucket)
