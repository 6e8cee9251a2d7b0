"""Check an API response against its schema in the studio's own OpenAPI document."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from studio.api.openapi import build_openapi


def schema_validator(name: str) -> Draft202012Validator:
    """A validator for the component schema `name` (`Save`, `Turn`, ...), its `$ref`s resolved."""
    document = build_openapi()
    return Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})
