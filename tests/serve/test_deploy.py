"""deploy/ is checked without a Docker engine: files parse, ports and probes agree, the env var names
are the ones the config names, and every command line is one the `xihe` console script accepts."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from xihe.agent.app import load_config
from xihe.agent.cli.main import build_parser, cmd_serve
from xihe.config.wecom import WECOM_SECTION

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        if raw.strip().startswith("#") or not raw.strip():
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    instructions = [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1].strip()) for ln in lines]
    last_from = max(i for i, (k, _) in enumerate(instructions) if k == "FROM")
    return instructions[last_from:]


def _one(instrs: list[tuple[str, str]], key: str) -> str:
    found = [v for k, v in instrs if k == key]
    assert len(found) == 1, f"{key}: {found}"
    return found[0]


def console_script() -> str:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["xihe"] == "xihe.agent.cli.main:main"
    return "xihe"


def parse_cli(argv: list[str]) -> Any:
    """What the console script would do with these arguments."""
    assert argv[0].rsplit("/", 1)[-1] == console_script()
    return build_parser().parse_args(argv[1:])


def k8s(name: str) -> dict[str, Any]:
    docs = list(yaml.safe_load_all((K8S / name).read_text()))
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0]
    return doc


def env_names_in(config_dir: Path) -> set[str]:
    """Every environment variable the config names through an *_env key (enabled parts only)."""
    settings = load_config(config_dir)
    names = {settings.core.llm.api_key_env}
    wecom = settings.get(WECOM_SECTION)
    if wecom is not None and wecom.enabled:
        names |= {wecom.corp_id_env, wecom.token_env, wecom.aes_key_env, wecom.secret_env}
        if wecom.aibot.enabled:
            names |= {wecom.aibot.token_env, wecom.aibot.aes_key_env}
    return names


def test_dockerfile_is_slim_non_root_and_runs_xihe_serve() -> None:
    final = dockerfile()
    assert "slim" in _one(final, "FROM")
    user = _one(final, "USER")
    assert user not in ("root", "0")
    port = int(_one(final, "EXPOSE"))
    entry = json.loads(_one(final, "ENTRYPOINT"))
    cmd = json.loads(_one(final, "CMD"))
    args = parse_cli(entry + cmd)
    assert args.func is cmd_serve and args.host == "0.0.0.0" and args.port == port
    assert args.config == "/etc/xihe"
    health = _one(final, "HEALTHCHECK")
    assert f"127.0.0.1:{port}/healthz" in health and "--interval=" in health
    assert _one(final, "STOPSIGNAL") == "SIGTERM"
    # the config files copied in are a valid directory
    assert any(k == "COPY" and v.endswith("/etc/xihe/") for k, v in final)


def test_compose_runs_postgres_and_xihe_with_the_right_names() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    db, bot = compose["services"]["postgres"], compose["services"]["xihe"]
    assert db["image"].startswith("postgres:") and "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert (
        bot["build"]["dockerfile"] == "deploy/Dockerfile"
        and (DEPLOY / bot["build"]["context"]).resolve() == REPO
    )
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"
    args = parse_cli(["xihe", *bot["command"]])
    assert args.func is cmd_serve and args.host == "0.0.0.0"
    assert bot["ports"] == [f"{args.port}:{args.port}"]
    assert (
        bot["environment"]["XIHE_DATABASE_URL"].startswith("postgresql://")
        and "@postgres:5432/" in bot["environment"]["XIHE_DATABASE_URL"]
    )
    assert f"127.0.0.1:{args.port}/readyz" in " ".join(bot["healthcheck"]["test"])
    mount = next(v for v in bot["volumes"] if v.split(":")[1] == args.config)
    assert (DEPLOY / mount.split(":")[0]).resolve() == REPO / "config"
    example = {
        line.split("=", 1)[0]
        for line in (DEPLOY / bot["env_file"][0]).with_suffix(".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert env_names_in(REPO / "config") | {"XIHE_WECOM_AIBOT_TOKEN", "XIHE_WECOM_AIBOT_AES_KEY"} <= example


def test_systemd_unit_runs_xihe_serve_as_a_service_user() -> None:
    unit: dict[str, str] = {}
    for line in (DEPLOY / "xihe.service").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            unit[key] = value
    args = parse_cli(shlex.split(unit["ExecStart"]))
    assert (
        args.func is cmd_serve and args.config == "/etc/xihe" and unit["WorkingDirectory"] == "/var/lib/xihe"
    )
    assert unit["User"] not in ("root", "0") and unit["KillSignal"] == "SIGTERM"
    assert unit["EnvironmentFile"] == "/etc/xihe/xihe.env" and unit["Restart"] == "on-failure"


def test_kubernetes_two_replicas_probes_service_configmap_and_secret(tmp_path: Path) -> None:
    deployment, service = k8s("deployment.yaml"), k8s("service.yaml")
    configmap, secret = k8s("configmap.yaml"), k8s("secret.yaml")
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    args = parse_cli(["xihe", *container["args"]])
    assert args.func is cmd_serve and args.host == "0.0.0.0"
    (port,) = container["ports"]
    assert port["containerPort"] == args.port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])

    config_volume = next(v for v in pod["volumes"] if v.get("configMap"))
    assert config_volume["configMap"]["name"] == configmap["metadata"]["name"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == config_volume["name"])
    assert mount["mountPath"] == args.config and mount["readOnly"] is True
    (env_from,) = container["envFrom"]
    assert env_from["secretRef"]["name"] == secret["metadata"]["name"] and secret["kind"] == "Secret"

    # the ConfigMap's files are a valid config directory, and every secret it names is in the Secret
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    needed = env_names_in(tmp_path)
    assert needed <= set(secret["stringData"]), needed - set(secret["stringData"])
    assert "XIHE_DATABASE_URL" in secret["stringData"]


@pytest.mark.parametrize(
    "name",
    [
        "Dockerfile",
        "docker-compose.yml",
        "xihe.service",
        "xihe.env.example",
        "k8s/configmap.yaml",
        "k8s/secret.yaml",
        "k8s/deployment.yaml",
        "k8s/service.yaml",
    ],
)
def test_readme_documents_each_file(name: str) -> None:
    assert f"`{name}`" in (DEPLOY / "README.md").read_text()
