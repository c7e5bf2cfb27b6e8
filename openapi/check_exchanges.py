#!/usr/bin/env python3
"""Validates the admin API's OpenAPI document, then real exchanges against it.

    python3 openapi/check_exchanges.py openapi/admin.yaml exchanges.json

`exchanges.json` is a list of {"method", "path" (with the query), "requestBody", "status",
"contentType", "body"} recorded from a real server by the test suite (`AdminAPITests`). Every exchange must
match a documented operation and status, and its JSON body must validate against that
response's schema (additional properties are refused where the spec says so); the request
body of every accepted call must validate against the operation's request schema. Every documented
operation must have been exercised with a 2xx answer at least once. The spec must be as strict
as the server: a request the server refused with 400 must break the spec too (its body, a query
or a path parameter), and a request it accepted must not. Exit 0 when all holds.
Needs openapi-spec-validator and openapi-schema-validator (pip).
"""
import json
import re
import sys
from urllib.parse import parse_qs, unquote, urlsplit

import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from openapi_spec_validator import validate as validate_spec


def resolve(node, root):
    """Inlines every local $ref (the document has no cycles)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = root
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            return resolve(target, root)
        return {key: resolve(value, root) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(item, root) for item in node]
    return node


def coerce(text, schema):
    """A query or path parameter's text as the JSON value its schema types it as."""
    kind = schema.get("type")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    return text


def request_errors(operation, exchange, path_values):
    """What in the recorded request the operation's spec refuses (parameters and body)."""
    errors = []
    query = parse_qs(urlsplit(exchange["path"]).query, keep_blank_values=True)
    for param in operation.get("parameters", []):
        if param["in"] == "query":
            values = query.get(param["name"])
            if values is None:
                if param.get("required"):
                    errors.append(f"query parameter {param['name']} missing")
                continue
            value = coerce(values[0], param["schema"])
        elif param["in"] == "path":
            value = coerce(unquote(path_values[param["name"]]), param["schema"])
        else:
            continue
        for error in OAS30Validator(param["schema"], format_checker=oas30_format_checker).iter_errors(value):
            errors.append(f"{param['in']} parameter {param['name']}: {error.message}")
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is not None and exchange.get("requestBody") is not None:
        try:
            sent = json.loads(exchange["requestBody"])
        except ValueError:
            return errors + ["request body is not JSON"]
        for error in OAS30Validator(schema, format_checker=oas30_format_checker).iter_errors(sent):
            errors.append(f"request {'/'.join(map(str, error.path)) or '(body)'}: {error.message}")
    return errors


def main():
    # --partial: check the recorded answers only, not that every operation was exercised.
    partial = "--partial" in sys.argv[1:]
    spec_path, exchanges_path = [argument for argument in sys.argv[1:] if not argument.startswith("--")][:2]
    with open(spec_path) as f:
        raw = yaml.safe_load(f)
    validate_spec(raw)
    spec = resolve(raw, raw)
    templates = []
    for template, item in spec["paths"].items():
        pattern = "^" + re.sub(r"\{([^/]+)\}", r"(?P<\1>[^/]+)", template) + "$"
        templates.append((re.compile(pattern), template, item))
    with open(exchanges_path) as f:
        exchanges = json.load(f)
    failures, exercised = [], set()
    for number, exchange in enumerate(exchanges):
        method, path = exchange["method"].lower(), urlsplit(exchange["path"]).path
        where = f"#{number} {exchange['method']} {exchange['path']} → {exchange['status']}"
        match = next(((template, item, pattern.match(path)) for pattern, template, item in templates if pattern.match(path)), None)
        if match is None or method not in match[1]:
            failures.append(f"{where}: no such operation in the spec")
            continue
        template, item, found = match
        responses = item[method]["responses"]
        response = responses.get(str(exchange["status"]))
        if response is None:
            failures.append(f"{where}: status not documented (documented: {', '.join(responses)})")
            continue
        refused_by_spec = request_errors(item[method], exchange, found.groupdict())
        if 200 <= exchange["status"] < 300:
            exercised.add((template, method))
            # What the server accepted, the spec accepts too.
            failures += [f"{where}: {error}" for error in refused_by_spec]
        elif exchange["status"] == 400 and not refused_by_spec:
            failures.append(f"{where}: the server refused a request the spec allows (the spec is less strict than the server)")
        content = response.get("content", {})
        media = exchange["contentType"].split(";")[0].strip()
        if media not in content:
            failures.append(f"{where}: content type {media} not documented ({', '.join(content)})")
            continue
        if media != "application/json":
            continue
        try:
            body = json.loads(exchange["body"])
        except ValueError as error:
            failures.append(f"{where}: body is not JSON: {error}")
            continue
        validator = OAS30Validator(content[media]["schema"], format_checker=oas30_format_checker)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
        for error in errors:
            failures.append(f"{where}: {'/'.join(map(str, error.path)) or '(body)'}: {error.message}")
    for template, item in ({} if partial else spec["paths"]).items():
        for method in item:
            if method in ("get", "post", "put", "delete", "patch") and (template, method) not in exercised:
                failures.append(f"{method.upper()} {template}: never answered 2xx in the recorded exchanges")
    for failure in failures:
        print("FAIL", failure)
    print(f"{len(exchanges)} exchanges, {len(exercised)} operations exercised, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
