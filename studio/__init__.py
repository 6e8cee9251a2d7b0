"""Axiom Studio: a web studio around a narrative-memory engine for AI-narrated games."""

from studio.celery import app as celery_app

__all__ = ("celery_app",)
