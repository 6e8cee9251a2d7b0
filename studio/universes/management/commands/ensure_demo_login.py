"""`manage.py ensure_demo_login`: in DEBUG on a fresh database, create and print a demo login."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from studio.roles import AUTHORS, PLAYTESTERS
from studio.world.models import Universe

DEMO_USERNAME = "demo"
DEMO_UNIVERSE_SLUG = "the-drowned-reach"


class Command(BaseCommand):
    help = (
        "When DEBUG is on and there are no users at all, create the superuser 'demo' with a "
        "random password, put it in the Authors and Playtesters groups, make it the owner of "
        "the demo universe and print the login. Otherwise do nothing. Never runs with DEBUG off."
    )

    def handle(self, *args, **options):
        if not settings.DEBUG:
            self.stdout.write("No demo login created: DEBUG is off.")
            return
        User = get_user_model()
        with transaction.atomic():
            if User.objects.exists():
                self.stdout.write(
                    "No demo login created: users already exist "
                    f"(forgot the password? manage.py changepassword {DEMO_USERNAME})."
                )
                return
            password = secrets.token_urlsafe(9)
            user = User.objects.create_superuser(DEMO_USERNAME, email="", password=password)
            for name in (AUTHORS, PLAYTESTERS):
                group, _ = Group.objects.get_or_create(name=name)
                user.groups.add(group)
            owned = Universe.objects.filter(slug=DEMO_UNIVERSE_SLUG, owner__isnull=True).update(owner=user)
        self.stdout.write(self.style.SUCCESS(f"Demo login: {DEMO_USERNAME} / {password}"))
        if not owned:
            self.stdout.write("(The demo universe is not loaded yet or already has an owner: run manage.py load_demo.)")
