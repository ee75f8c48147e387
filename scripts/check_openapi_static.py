"""Static check of the OpenAPI description: the document against the OpenAPI 3.1 meta-schema,
and each schema's examples against the schema. Run by scripts/check-openapi.sh with the spec's
path as its one argument; prints problems and exits 1 if there are any."""
import json
import sys
from urllib.parse import quote

import jsonschema_rs
import schemathesis
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    doc = json.load(f)
problems = []


def where(parts):
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


# The document itself.
for error in OPENAPI_31_VALIDATOR.iter_errors(doc):
    problems.append(f"not OpenAPI 3.1 at {where(error.instance_path)}: {error.message}")
if doc.get("openapi", "").split(".")[:2] != ["3", "1"]:
    problems.append("`openapi` is not 3.1.x")


def validator(pointer):
    """A validator for the schema at `pointer`, resolving references against the whole document."""
    root = dict(doc)
    root["$ref"] = "#" + quote(where(pointer), safe="/~")
    return jsonschema_rs.Draft202012Validator(root, validate_formats=False)


def check_schema(pointer, schema):
    try:
        jsonschema_rs.meta.validate(schema if isinstance(schema, dict) else {})
        return validator(pointer)
    except Exception as error:  # invalid keyword values, bad regexes, dangling references
        problems.append(f"schema at {where(pointer)}: {str(error).splitlines()[0]}")
        return None


def check_value(v, pointer, value, label):
    if v is None:
        return
    for error in v.iter_errors(value):
        problems.append(f"{label} at {where(pointer)} does not match its schema: {error.message}")


def resolve(node):
    """Follows local references; a dangling one resolves to nothing (and is reported elsewhere)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 32:
        target = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                problems.append(f"dangling reference {node['$ref']}")
                return {}
            target = target[part]
        node, seen = target, seen + 1
    return node


def check_media(pointer, media):
    schema = media.get("schema")
    if schema is None:
        return
    v = check_schema(pointer + ["schema"], schema)
    resolved = resolve(schema)
    if isinstance(resolved, dict) and resolved.get("format") == "binary":
        return
    if "example" in media:
        check_value(v, pointer + ["example"], media["example"], "example")
    for name, example in media.get("examples", {}).items():
        example = resolve(example)
        if "value" in example:
            check_value(v, pointer + ["examples", name, "value"], example["value"], "example")


def check_parameter_or_header(pointer, item):
    if "schema" in item:
        v = check_schema(pointer + ["schema"], item["schema"])
        if "example" in item:
            check_value(v, pointer + ["example"], item["example"], "example")
        for name, example in item.get("examples", {}).items():
            example = resolve(example)
            if "value" in example:
                check_value(v, pointer + ["examples", name, "value"], example["value"], "example")
    for media_type, media in item.get("content", {}).items():
        check_media(pointer + ["content", media_type], media)


def check_response(pointer, response):
    for name, item in response.get("headers", {}).items():
        if "$ref" not in item:
            check_parameter_or_header(pointer + ["headers", name], item)
    for media_type, media in response.get("content", {}).items():
        check_media(pointer + ["content", media_type], media)


components = doc.get("components", {})
for name, schema in components.get("schemas", {}).items():
    v = check_schema(["components", "schemas", name], schema)
    for i, example in enumerate(schema.get("examples", []) if isinstance(schema, dict) else []):
        check_value(v, ["components", "schemas", name, "examples", i], example, "example")
for kind in ("parameters", "headers"):
    for name, item in components.get(kind, {}).items():
        check_parameter_or_header(["components", kind, name], item)
for name, response in components.get("responses", {}).items():
    check_response(["components", "responses", name], response)

operation_ids = set()
for route, item in doc.get("paths", {}).items():
    for i, parameter in enumerate(item.get("parameters", [])):
        if "$ref" not in parameter:
            check_parameter_or_header(["paths", route, "parameters", i], parameter)
    for method, operation in item.items():
        if method not in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
            continue
        pointer = ["paths", route, method]
        op_id = operation.get("operationId")
        if not op_id or op_id in operation_ids:
            problems.append(f"{where(pointer)}: missing or repeated operationId {op_id!r}")
        operation_ids.add(op_id)
        for i, parameter in enumerate(operation.get("parameters", [])):
            if "$ref" not in parameter:
                check_parameter_or_header(pointer + ["parameters", i], parameter)
        body = operation.get("requestBody", {})
        for media_type, media in body.get("content", {}).items():
            check_media(pointer + ["requestBody", "content", media_type], media)
        for status, response in operation.get("responses", {}).items():
            if "$ref" not in response:
                check_response(pointer + ["responses", status], response)

# schemathesis reads every operation.
loaded = schemathesis.openapi.from_path(path)
count = 0
for result in loaded.get_all_operations():
    try:
        result.ok()
        count += 1
    except Exception as error:
        problems.append(f"schemathesis cannot load an operation: {error}")

for problem in problems:
    print(f"[openapi]   {problem}")
if problems:
    sys.exit(1)
print(f"[openapi] static: ok, {count} operations on {len(doc['paths'])} paths")
