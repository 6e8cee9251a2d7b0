"""`manage.py ensure_demo_login`: a printed demo login, only in DEBUG on an empty database."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import override_settings

from studio.roles import AUTHORS, PLAYTESTERS
from studio.world.models import Universe

LOGIN_RE = re.compile(r"Demo login: demo / (\S+)")


def ensure() -> str:
    out = io.StringIO()
    call_command("ensure_demo_login", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@override_settings(DEBUG=True)
def test_creates_and_prints_a_demo_superuser_on_an_empty_database():
    call_command("load_demo", "--no-embed", stdout=io.StringIO())
    output = ensure()

    match = LOGIN_RE.search(output)
    assert match, output
    password = match.group(1)
    assert len(password) >= 12
    user = get_user_model().objects.get()
    assert user.username == "demo"
    assert user.is_superuser and user.is_staff
    assert user.check_password(password)
    assert set(user.groups.values_list("name", flat=True)) == {AUTHORS, PLAYTESTERS}
    assert Universe.objects.get(slug="the-drowned-reach").owner == user


@pytest.mark.django_db
@override_settings(DEBUG=True)
def test_is_idempotent():
    password = LOGIN_RE.search(ensure()).group(1)
    second = ensure()
    assert not LOGIN_RE.search(second)
    assert "already exist" in second
    users = get_user_model().objects.all()
    assert users.count() == 1
    assert users.get().check_password(password)  # the first password still works


@pytest.mark.django_db
@override_settings(DEBUG=False)
def test_never_runs_with_debug_off():
    output = ensure()
    assert not LOGIN_RE.search(output)
    assert "DEBUG is off" in output
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
@override_settings(DEBUG=True)
def test_leaves_a_database_with_users_alone():
    get_user_model().objects.create_user("someone", password="pw")
    output = ensure()
    assert not LOGIN_RE.search(output)
    assert not get_user_model().objects.filter(username="demo").exists()


@pytest.mark.django_db
@override_settings(DEBUG=True)
def test_works_before_the_demo_is_loaded():
    output = ensure()
    assert LOGIN_RE.search(output)
    assert "load_demo" in output
