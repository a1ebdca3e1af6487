"""New servers require TLS (sslmode=require) and SCRAM; servers added before keep what they had: their sslmode
stays, and require_scram is added as False for them (a password stored as MD5 on the server would otherwise
stop their collection at the upgrade). Their pages say what is left open (Server.tls_warnings)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0002_organization_limits"),
    ]

    operations = [
        migrations.AlterField(
            model_name="server",
            name="sslmode",
            field=models.CharField(
                choices=[
                    ("disable", "Disable"),
                    ("allow", "Allow"),
                    ("prefer", "Prefer"),
                    ("require", "Require"),
                    ("verify-ca", "Verify Ca"),
                    ("verify-full", "Verify Full"),
                ],
                default="require",
                max_length=12,
            ),
        ),
        migrations.AddField(
            model_name="server",
            name="ssl_root_cert",
            field=models.TextField(
                blank=True,
                default="",
                help_text="The CA that signed the server's certificate (PEM), or system for the machine's trusted "
                "roots; empty: ~/.postgresql/root.crt of the console's account. Used with sslmode verify-full or "
                "verify-ca.",
                verbose_name="CA certificate",
            ),
        ),
        migrations.AddField(
            model_name="server",
            name="require_scram",
            field=models.BooleanField(default=False),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="server",
            name="require_scram",
            field=models.BooleanField(
                default=True,
                help_text="Send the password only through SCRAM-SHA-256: the connection fails rather than send it "
                "in clear or as an MD5 hash.",
                verbose_name="Require SCRAM",
            ),
        ),
    ]
