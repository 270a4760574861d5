# SPDX-License-Identifier: Apache-2.0
"""Kubernetes manifests, offline: both overlays render with `kubectl kustomize`, yamllint passes, every rendered
container command line is accepted by the built binaries (`--check-config`), the config files name the volumes the
pods mount, and the Dockerfile's runtime packages cover the libraries the binaries link."""
import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import FT_BIN, ROOT

K8S = ROOT / "k8s"
OVERLAYS = ["dev", "prod"]
# Values the kubelet would put in the containers' environment ($(VAR) in args).
FAKE_ENV = {"POD_IP": "10.1.2.3"}


def kubectl():
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (scripts/deps.sh installs Debian's kubernetes-client)")
    return path


def render(overlay):
    proc = subprocess.run([kubectl(), "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request):
    return request.param, render(request.param)


def test_yamllint_passes():
    if shutil.which("yamllint") is None:
        pytest.skip("yamllint is not installed (scripts/deps.sh installs it)")
    proc = subprocess.run(["yamllint", "-s", "-c", str(K8S / ".yamllint"), str(K8S)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shape(rendered):
    overlay, docs = rendered
    sts = by_kind(docs, "StatefulSet")
    assert set(sts) == {"ft-proxy", "ft-target"}
    # One proxy in both: several need an etcd endpoint, which the overlays do not run (docs/kubernetes.md).
    assert sts["ft-proxy"]["spec"]["replicas"] == 1
    assert sts["ft-target"]["spec"]["replicas"] == (3 if overlay == "dev" else 4)
    services = by_kind(docs, "Service")
    assert services["ft-proxy-headless"]["spec"]["clusterIP"] == "None"
    assert services["ft-target"]["spec"]["clusterIP"] == "None"
    assert services["ft-proxy"]["spec"].get("clusterIP") != "None"
    for name, s in sts.items():
        assert s["spec"]["serviceName"] in services
        labels = s["spec"]["template"]["metadata"]["labels"]
        assert s["spec"]["selector"]["matchLabels"].items() <= labels.items()
        pod = s["spec"]["template"]["spec"]
        for c in pod["containers"]:
            ports = {p["name"] for p in c["ports"]}
            for probe in ("readinessProbe", "livenessProbe"):
                assert c[probe]["httpGet"]["path"] == "/v1/health", (name, probe)
                assert c[probe]["httpGet"]["port"] in ports
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    for s in services.values():
        assert any(s["spec"]["selector"].items() <= st["spec"]["template"]["metadata"]["labels"].items()
                   for st in sts.values()), s["metadata"]["name"]
    pdbs = by_kind(docs, "PodDisruptionBudget")
    assert set(pdbs) == {"ft-proxy", "ft-target"} and pdbs["ft-target"]["spec"]["maxUnavailable"] == 1
    anti = sts["ft-target"]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    if overlay == "prod":
        assert anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert "preferredDuringSchedulingIgnoredDuringExecution" not in anti
        claims = sts["ft-target"]["spec"]["volumeClaimTemplates"]
        assert [c["metadata"]["name"] for c in claims] == ["mp0", "mp1", "mp2", "mp3"]
        assert all(c["spec"]["storageClassName"] == "fasttier-local-nvme" for c in claims)
        sc = by_kind(docs, "StorageClass")["fasttier-local-nvme"]
        assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    else:
        assert anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert len(by_kind(docs, "ConfigMap")) == 1 and len(by_kind(docs, "Secret")) == 1


def volume_files(docs, pod, tmp):
    """Writes each ConfigMap and Secret volume of pod under tmp at its mountPath; {mountPath: local dir}."""
    cms = by_kind(docs, "ConfigMap")
    secrets = by_kind(docs, "Secret")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    out = {}
    for c in pod["containers"]:
        for m in c.get("volumeMounts", []):
            vol = vols.get(m["name"])  # None: a volume claim template
            if vol is None:
                continue
            if "configMap" in vol:
                files = cms[vol["configMap"]["name"]]["data"]
            elif "secret" in vol:
                sec = secrets[vol["secret"]["secretName"]]
                files = {k: base64.b64decode(v).decode() for k, v in sec.get("data", {}).items()}
                files.update(sec.get("stringData", {}))
            else:
                continue
            local = tmp / m["mountPath"].lstrip("/")
            local.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (local / name).write_text(text)
            out[m["mountPath"]] = local
    return out


def command_line(container, sts_name, mounts):
    """The container's command and args as the kubelet would run them, against the built binaries and the local
    copies of the mounted files."""
    env = dict(FAKE_ENV, POD_NAME=sts_name + "-0")
    argv = list(container["command"]) + list(container.get("args", []))
    argv[0] = os.path.join(FT_BIN, os.path.basename(argv[0]))
    out = []
    for a in argv[1:]:
        a = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m.group(1)], a)
        for mount, local in mounts.items():
            if a.startswith(mount + "/"):
                a = str(local) + a[len(mount):]
        out.append(a)
    return [argv[0]] + out


def test_rendered_commands_pass_check_config(rendered, tmp_path):
    overlay, docs = rendered
    for name, sts in by_kind(docs, "StatefulSet").items():
        pod = sts["spec"]["template"]["spec"]
        mounts = volume_files(docs, pod, tmp_path / name)
        for c in pod["containers"]:
            argv = command_line(c, name, mounts)
            proc = subprocess.run(argv + ["--check-config"], capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0 and proc.stdout.startswith("OK "), (overlay, argv, proc.stderr)
            assert "id=%s-0" % name in proc.stdout
            # A flag the binary does not know fails the same check: the manifests cannot drift from the flags.
            bad = subprocess.run(argv + ["--no_such_flag", "1", "--check-config"], capture_output=True, text=True,
                                 timeout=30)
            assert bad.returncode != 0 and "no_such_flag" in bad.stderr


def test_config_mountpaths_are_mounted(rendered):
    overlay, docs = rendered
    target = by_kind(docs, "StatefulSet")["ft-target"]
    cfg = json.loads(next(iter(by_kind(docs, "ConfigMap").values()))["data"]["target.json"])
    c = target["spec"]["template"]["spec"]["containers"][0]
    mounted = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in target["spec"]["volumeClaimTemplates"]}
    for mp in cfg["mountpaths"]:
        assert mp in mounted, (overlay, mp)
        assert mounted[mp] in claims, (overlay, mp)  # each mountpath on its own persistent volume
    assert len(set(mounted[mp] for mp in cfg["mountpaths"])) == len(cfg["mountpaths"])


def test_proxy_url_names_the_proxy_pod(rendered):
    _, docs = rendered
    sts = by_kind(docs, "StatefulSet")
    args = sts["ft-target"]["spec"]["template"]["spec"]["containers"][0]["args"]
    url = args[args.index("--proxy_url") + 1]
    assert url == "http://ft-proxy-0.%s:51081" % sts["ft-proxy"]["spec"]["serviceName"]


def needed_packages(binary):
    """Debian packages of the libraries binary names as NEEDED (not their dependencies), libc's left out."""
    dyn = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", dyn)
    paths = {}
    for line in subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            paths[m.group(1)] = os.path.realpath(m.group(2))
    pkgs = set()
    for lib in needed:
        out = subprocess.run(["dpkg", "-S", paths[lib]], capture_output=True, text=True).stdout
        pkg = out.split(":", 1)[0]
        # libc is in every image; a sanitizer runtime (make SANITIZER=...) is not what the image builds
        if pkg and pkg not in ("libc6", "libgcc-s1") and not re.match(r"lib(asan|ubsan|tsan)\d", pkg):
            pkgs.add(pkg)
    return pkgs


def test_dockerfile_runtime_packages_cover_the_binaries():
    if shutil.which("dpkg") is None or shutil.which("objdump") is None:
        pytest.skip("needs dpkg and objdump (Debian's dpkg, binutils)")
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM debian:12 AS build$", text, re.M) and re.search(r"^FROM debian:12-slim$", text, re.M)
    runtime = text.split("FROM debian:12-slim", 1)[1]
    for exe in ("ft-proxy", "ft-target"):
        for pkg in needed_packages(os.path.join(FT_BIN, exe)):
            assert re.search(r"\b%s\b" % re.escape(pkg), runtime), "%s links %s, not installed in the image" % (
                exe, pkg)
    # Every folder the Makefile builds from is copied into the build stage.
    for folder in ("common", "cloud", "proxy", "target", "loader"):
        assert "COPY %s %s" % (folder, folder) in text


@pytest.mark.parametrize("argv, why", [
    (["ft-target", "--proxy_url", "http://p:1"], "no mountpath configured"),
    (["ft-target", "--mountpath", "/d", "--proxy_url", "p:1"], "proxy_url must start with http://"),
    (["ft-target", "--mountpath", "/d", "--id", "bad id"], "invalid --id"),
    (["ft-proxy", "--s3_keys", "/nonexistent/keys.json"], "s3_keys /nonexistent/keys.json"),
    (["ft-proxy", "--public_port", "9000", "--control_port", "9000"], "equals public_port 9000"),
    (["ft-proxy", "--log-format", "yaml"], "log_format"),
])
def test_check_config_refuses_bad_settings(argv, why, tmp_path):
    proc = subprocess.run([os.path.join(FT_BIN, argv[0])] + argv[1:] + ["--check-config"], capture_output=True,
                          text=True, timeout=30, cwd=str(tmp_path))
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert not proc.stdout and not os.listdir(tmp_path)  # nothing written, not even a state file
