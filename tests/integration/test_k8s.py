# SPDX-License-Identifier: Apache-2.0
"""Kubernetes manifests, offline: both overlays render with `kubectl kustomize`, yamllint passes, every rendered
container command line is accepted by the built binaries (`--check-config`), the config files name the volumes the
pods mount, prod's three proxies share its etcd and the targets list all three, and the Dockerfile's runtime packages
cover the libraries the binaries link."""
import base64
import copy
import json
import os
import re
import shutil
import socket
import subprocess
from urllib.parse import urlsplit

import pytest
import requests
import yaml

from conftest import FT_BIN, ROOT
from ftutil import wait_until

K8S = ROOT / "k8s"
OVERLAYS = ["dev", "prod"]
PROXIES = {"dev": 1, "prod": 3}
TARGETS = {"dev": 3, "prod": 4}
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


def arg(container, flag):
    """The value after flag in the container's args, or None."""
    args = container.get("args", [])
    return args[args.index(flag) + 1] if flag in args else None


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
    # dev: one proxy, no etcd; prod: three proxies on its own etcd (docs/kubernetes.md).
    assert set(sts) == ({"ft-proxy", "ft-target"} | ({"ft-etcd"} if overlay == "prod" else set()))
    assert sts["ft-proxy"]["spec"]["replicas"] == PROXIES[overlay]
    assert sts["ft-target"]["spec"]["replicas"] == TARGETS[overlay]
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
                assert c[probe]["httpGet"]["path"] == ("/health" if name == "ft-etcd" else "/v1/health"), (name, probe)
                assert c[probe]["httpGet"]["port"] in ports
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    for s in services.values():
        assert any(s["spec"]["selector"].items() <= st["spec"]["template"]["metadata"]["labels"].items()
                   for st in sts.values()), s["metadata"]["name"]
    pdbs = by_kind(docs, "PodDisruptionBudget")
    assert set(pdbs) == {"ft-proxy", "ft-target"}
    assert pdbs["ft-target"]["spec"]["maxUnavailable"] == 1 and pdbs["ft-proxy"]["spec"]["maxUnavailable"] == 1
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
    if overlay == "prod":
        docs = docs + [etcd_tls_secret()]  # applied by the operator before the overlay (docs/kubernetes.md)
    for name, sts in by_kind(docs, "StatefulSet").items():
        if name == "ft-etcd":
            continue  # not a FastTier binary: test_etcd_flags_are_known checks its flags
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


def test_secret_volumes_are_not_world_readable(rendered):
    """Kubernetes mounts a secret 0644 unless told otherwise: every secret volume says a mode others cannot read."""
    overlay, docs = rendered
    for name, sts in by_kind(docs, "StatefulSet").items():
        for v in sts["spec"]["template"]["spec"].get("volumes", []):
            if "secret" in v:
                mode = v["secret"].get("defaultMode", 0o644)
                assert mode & 0o007 == 0, (overlay, name, v["name"], oct(mode))


def proxy_topology_problems(docs):
    """What is wrong with how the proxies find etcd and the targets find the proxies; [] when nothing is.

    Targets list every proxy pod's control URL by its stable DNS name; with more than one proxy every proxy names
    the same etcd, through the headless Service of the etcd StatefulSet, at its client port."""
    problems = []
    sts = by_kind(docs, "StatefulSet")
    services = by_kind(docs, "Service")
    proxy = sts["ft-proxy"]
    n = proxy["spec"]["replicas"]
    pc = proxy["spec"]["template"]["spec"]["containers"][0]
    control = next(p["containerPort"] for p in pc["ports"] if p["name"] == "control")
    want = ",".join("http://ft-proxy-%d.%s:%d" % (i, proxy["spec"]["serviceName"], control) for i in range(n))
    got = arg(sts["ft-target"]["spec"]["template"]["spec"]["containers"][0], "--proxy_url")
    if got != want:
        problems.append("targets' --proxy_url %r, want %r" % (got, want))
    etcd_url = arg(pc, "--etcd")
    if n > 1 and etcd_url is None:
        problems.append("%d proxies without --etcd" % n)
    if etcd_url is None:
        if "ft-etcd" in sts:
            problems.append("an etcd StatefulSet no proxy uses")
        return problems
    etcd = sts.get("ft-etcd")
    if etcd is None:
        return problems + ["--etcd %s but no etcd StatefulSet" % etcd_url]
    u = urlsplit(etcd_url)
    svc_name = etcd["spec"]["serviceName"]
    svc = services.get(svc_name)
    ec = etcd["spec"]["template"]["spec"]["containers"][0]
    served = urlsplit(arg(ec, "--listen-client-urls") or "http://").scheme
    if u.hostname not in (svc_name, "ft-etcd-0.%s" % svc_name):
        problems.append("--etcd %s does not name the etcd Service %s" % (etcd_url, svc_name))
    if u.scheme != served:
        problems.append("--etcd %s is not the scheme etcd serves (%s)" % (etcd_url, served))
    problems += etcd_tls_problems(proxy, etcd)
    if svc is None or svc["spec"].get("clusterIP") != "None":
        problems.append("etcd Service %s missing or not headless" % svc_name)
    elif not svc["spec"]["selector"].items() <= etcd["spec"]["template"]["metadata"]["labels"].items():
        problems.append("etcd Service %s does not select the etcd pods" % svc_name)
    elif u.port not in [p["port"] for p in svc["spec"]["ports"] if p["name"] == "client"]:
        problems.append("--etcd port %s is not the etcd Service's client port" % u.port)
    members = arg(etcd["spec"]["template"]["spec"]["containers"][0], "--initial-cluster") or ""
    if sorted(m.split("=", 1)[0] for m in members.split(",")) != \
            ["ft-etcd-%d" % i for i in range(etcd["spec"]["replicas"])]:
        problems.append("--initial-cluster %r does not list the %d etcd pods" % (members, etcd["spec"]["replicas"]))
    return problems


def secret_of(pod, container, path):
    """The Secret name of the volume container mounts at the directory of path, or None."""
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    vol = vols.get(mounts.get(os.path.dirname(path or "")), {})
    return vol.get("secret", {}).get("secretName")


def etcd_tls_problems(proxy, etcd):
    """An etcd that asks clients for a certificate: the proxies show one (--etcd_cert/--etcd_key) and verify etcd
    (--tls_ca), all from the Secret etcd's own CA comes from."""
    epod, ppod = etcd["spec"]["template"]["spec"], proxy["spec"]["template"]["spec"]
    ec, pc = epod["containers"][0], ppod["containers"][0]
    if "--client-cert-auth" not in ec.get("args", []):
        return []
    problems = []
    ca_secret = secret_of(epod, ec, arg(ec, "--trusted-ca-file"))
    for flag in ("--etcd_cert", "--etcd_key", "--tls_ca"):
        if arg(pc, flag) is None:
            problems.append("etcd asks for client certificates but the proxies have no %s" % flag)
        elif secret_of(ppod, pc, arg(pc, flag)) != ca_secret:
            problems.append("the proxies' %s is not from etcd's Secret %s" % (flag, ca_secret))
    return problems


def test_proxies_find_etcd_and_targets_find_every_proxy(rendered):
    overlay, docs = rendered
    assert proxy_topology_problems(docs) == []
    proxy = by_kind(docs, "StatefulSet")["ft-proxy"]
    has_etcd = arg(proxy["spec"]["template"]["spec"]["containers"][0], "--etcd") is not None
    assert has_etcd == (overlay == "prod")


def mutate(docs, kind, name, fn):
    docs = copy.deepcopy(docs)
    fn(by_kind(docs, kind)[name])
    return docs


def set_arg(flag, value):
    def fn(sts):
        args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
        if value is None:
            del args[args.index(flag):args.index(flag) + 2]
        else:
            args[args.index(flag) + 1] = value
    return fn


@pytest.mark.parametrize("kind, name, fn, why", [
    ("StatefulSet", "ft-proxy", lambda s: s["spec"].update(replicas=4), "targets' --proxy_url"),
    ("StatefulSet", "ft-target", set_arg("--proxy_url", "http://ft-proxy-0.ft-proxy-headless:51081"),
     "targets' --proxy_url"),
    ("StatefulSet", "ft-proxy", set_arg("--etcd", None), "3 proxies without --etcd"),
    ("StatefulSet", "ft-proxy", set_arg("--etcd", "https://etcd:2379"), "does not name the etcd Service"),
    ("StatefulSet", "ft-proxy", set_arg("--etcd", "https://ft-etcd:2380"), "not the etcd Service's client port"),
    ("StatefulSet", "ft-proxy", set_arg("--etcd", "http://ft-etcd:2379"), "not the scheme etcd serves"),
    ("StatefulSet", "ft-proxy", set_arg("--etcd_cert", None), "the proxies have no --etcd_cert"),
    ("StatefulSet", "ft-proxy", set_arg("--tls_ca", "/etc/fasttier/secret/ca.crt"), "--tls_ca is not from"),
    ("Service", "ft-etcd", lambda s: s["spec"]["selector"].update({"app.kubernetes.io/name": "x"}),
     "does not select the etcd pods"),
    ("StatefulSet", "ft-etcd", lambda s: s["spec"].update(replicas=3), "does not list the 3 etcd pods"),
])
def test_proxy_topology_check_catches_drift(kind, name, fn, why):
    problems = proxy_topology_problems(mutate(render("prod"), kind, name, fn))
    assert any(why in p for p in problems), problems


def test_etcd_flags_are_known():
    """Every flag of the rendered etcd command is one etcd 3.4 takes (Debian's etcd-server, the release of the
    image)."""
    etcd = shutil.which("etcd")
    if etcd is None:
        pytest.skip("etcd is not installed (scripts/deps.sh installs Debian's etcd-server)")
    version = subprocess.run([etcd, "--version"], capture_output=True, text=True, timeout=30).stdout
    helptext = subprocess.run([etcd, "--help"], capture_output=True, text=True, timeout=30)
    known = set(re.findall(r"^\s+(--[a-z0-9-]+)", helptext.stdout + helptext.stderr, re.M))
    c = by_kind(render("prod"), "StatefulSet")["ft-etcd"]["spec"]["template"]["spec"]["containers"][0]
    minor = re.search(r"etcd Version: (\d+\.\d+)\.", version).group(1)
    assert re.fullmatch(r"quay\.io/coreos/etcd:v%s\.\d+" % re.escape(minor), c["image"]), (c["image"], minor)
    flags = [a.split("=", 1)[0] for a in c["args"] if a.startswith("--")]
    assert flags and set(flags) <= known, set(flags) - known


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
    (["ft-target", "--mountpath", "/d", "--proxy_url", "p:1"], '"proxy_url": must be http://'),
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


def etcd_tls_secret():
    """The ft-etcd-tls Secret scripts/k8s-etcd-tls.sh prints for the prod overlay (what an operator applies)."""
    proc = subprocess.run([str(ROOT / "scripts" / "k8s-etcd-tls.sh"), "fasttier", "3"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("Secret", "ft-etcd-tls", "fasttier")]
    return docs[0]


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_prod_etcd_over_tls_works_as_rendered(tmp_path):
    """The prod overlay's etcd and proxy command lines, run here as rendered (with the Secret the script makes,
    the pod names and ports mapped to this machine): the proxy becomes primary on etcd over TLS with its client
    certificate; etcd refuses a client without one, and its probe port answers /health."""
    etcd_bin = shutil.which("etcd")
    if etcd_bin is None:
        pytest.skip("etcd is not installed (scripts/deps.sh installs Debian's etcd-server)")
    docs = render("prod") + [etcd_tls_secret()]
    sts = by_kind(docs, "StatefulSet")
    client, peer, metrics, public, control = free_ports(5)
    epod = sts["ft-etcd"]["spec"]["template"]["spec"]
    emounts = volume_files(docs, epod, tmp_path / "etcd")
    eargv = command_line(epod["containers"][0], "ft-etcd", emounts)
    host_map = {"0.0.0.0:2379": "127.0.0.1:%d" % client, "ft-etcd-0.ft-etcd:2379": "127.0.0.1:%d" % client,
                "0.0.0.0:2380": "127.0.0.1:%d" % peer, "ft-etcd-0.ft-etcd:2380": "127.0.0.1:%d" % peer,
                "0.0.0.0:2381": "127.0.0.1:%d" % metrics}
    eargv = [etcd_bin] + [re.sub("|".join(map(re.escape, host_map)), lambda m: host_map[m.group(0)], a)
                          for a in eargv[1:]]
    eargv[eargv.index("--data-dir") + 1] = str(tmp_path / "etcd-data")
    ppod = sts["ft-proxy"]["spec"]["template"]["spec"]
    pmounts = volume_files(docs, ppod, tmp_path / "proxy")
    pargv = command_line(ppod["containers"][0], "ft-proxy", pmounts)
    pargv[pargv.index("--etcd") + 1] = "https://127.0.0.1:%d" % client
    pargv += ["--bind", "127.0.0.1", "--public_host", "127.0.0.1", "--control_host", "127.0.0.1",
              "--public_port", str(public), "--control_port", str(control), "--state_dir", str(tmp_path / "p")]
    (tmp_path / "p").mkdir()
    procs = []
    try:
        with open(tmp_path / "etcd.log", "w") as elog, open(tmp_path / "proxy.log", "w") as plog:
            procs.append(subprocess.Popen(eargv, stdout=elog, stderr=subprocess.STDOUT))
            wait_until(lambda: http_ok("http://127.0.0.1:%d/health" % metrics), 30, what="etcd's /health")
            procs.append(subprocess.Popen(pargv, stdout=plog, stderr=subprocess.STDOUT))
            wait_until(lambda: primary("http://127.0.0.1:%d/v1/health" % public), 30,
                       what="the proxy to become primary on etcd over TLS")
        tls = tmp_path / "proxy" / "etc" / "fasttier" / "etcd-tls"
        with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
            requests.post("https://127.0.0.1:%d/v3/kv/range" % client, json={"key": "Lw=="},
                          verify=str(tls / "ca.crt"), timeout=10)
        r = requests.post("https://127.0.0.1:%d/v3/kv/range" % client, json={"key": "Lw==", "range_end": "AA=="},
                          verify=str(tls / "ca.crt"), cert=(str(tls / "client.crt"), str(tls / "client.key")),
                          timeout=10)
        assert r.status_code == 200 and int(r.json().get("count", 0)) > 0, r.text  # the proxy's documents
    except BaseException:
        for name in ("etcd.log", "proxy.log"):
            print("---- %s\n%s" % (name, (tmp_path / name).read_text()[-3000:]))
        raise
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def http_ok(url):
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.exceptions.RequestException:
        return False


def primary(url):
    try:
        return requests.get(url, timeout=2).json().get("primary") is True
    except (requests.exceptions.RequestException, ValueError):
        return False
