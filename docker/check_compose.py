"""Static checks of docker/compose.yaml that need no Docker engine (run by docker/check.sh, in a venv with privfit).

Complements ``docker compose config -q`` (syntax and schema, when a compose client exists) with what compose cannot
know: every ``PRIVFIT_*`` variable is a privfit setting and its value is accepted by ``privfit.settings.Settings``;
``depends_on`` targets and conditions make a valid start order; scaled services publish no fixed port; the build's
Dockerfile and the image's scripts exist and are inside the .dockerignore allowlist. Exit status 1 lists the faults.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from privfit.settings import Settings

CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
SCALED = {"worker", "dask-worker"}
INTERPOLATION = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: object, variables: dict[str, str]) -> object:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` with ``variables`` (check-time values)."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, operator, argument = match.group(1), match.group(2), match.group(3)
            if variables.get(name):
                return variables[name]
            if operator and operator.endswith("-"):
                return argument
            raise KeyError(f"${{{name}}} unset and without default ({argument or 'no message'})")

        return INTERPOLATION.sub(substitute, value)
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    return value


def main(compose_path: str) -> int:
    path = Path(compose_path).resolve()
    root = path.parent
    faults: list[str] = []
    document = yaml.safe_load(path.read_text())
    services: dict[str, dict] = document.get("services") or {}
    allow = [line[1:] for line in (root.parent / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    for name, service in services.items():
        where = f"service {name}"
        try:
            service = interpolate(service, {"POSTGRES_PASSWORD": "check", "MINIO_ROOT_PASSWORD": "check"})
        except KeyError as error:
            faults.append(f"{where}: {error}")
            continue
        if "image" not in service and "build" not in service:
            faults.append(f"{where}: neither image nor build")
        build = service.get("build")
        if build:
            context = (root / build["context"]).resolve()
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            if not dockerfile.is_file():
                faults.append(f"{where}: no Dockerfile at {dockerfile}")
            else:
                for script in re.findall(r"/app/(docker/[\w.-]+)", dockerfile.read_text()):
                    if not (context / script).is_file() or script not in allow:
                        faults.append(f"{dockerfile.name}: {script} missing or not in the .dockerignore allowlist")
        for target, condition in (service.get("depends_on") or {}).items():
            condition = condition.get("condition", "service_started") if isinstance(condition, dict) else condition
            if target not in services:
                faults.append(f"{where}: depends on unknown service {target}")
            elif condition not in CONDITIONS:
                faults.append(f"{where}: unknown condition {condition}")
            elif condition == "service_healthy" and "healthcheck" not in services[target]:
                faults.append(f"{where}: waits for {target} to be healthy, which has no healthcheck")
            elif condition == "service_completed_successfully" and services[target].get("restart", "no") != "no":
                faults.append(f"{where}: waits for {target} to complete, which restarts")
        if name in SCALED and (service.get("ports") or service.get("container_name")):
            faults.append(f"{where}: scaled with --scale, so no fixed port or container_name")
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        privfit = {key: str(value) for key, value in environment.items() if key.startswith("PRIVFIT_")}
        unknown = [key for key in privfit if key.removeprefix("PRIVFIT_").lower() not in Settings.model_fields]
        if unknown:
            faults.append(f"{where}: not privfit settings: {', '.join(unknown)}")
        elif privfit:
            try:
                Settings(**{key.removeprefix("PRIVFIT_").lower(): value for key, value in privfit.items()})
            except Exception as error:
                faults.append(f"{where}: settings refused: {error}")
    for example in sorted(root.glob("*.env.example")):  # the documented env files' privfit settings are valid too
        pairs = (line.split("=", 1) for line in example.read_text().splitlines() if "=" in line and line[0] != "#")
        values = {key.removeprefix("PRIVFIT_").lower(): value for key, value in pairs if key.startswith("PRIVFIT_")}
        try:
            Settings(**values)
        except Exception as error:
            faults.append(f"{example.name}: settings refused: {error}")
    for fault in faults:
        print(f"compose check: {fault}", file=sys.stderr)
    print(f"compose check: {len(services)} services, {len(faults)} faults")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docker/compose.yaml"))
