"""reports.Delivery is named ReportDelivery, apart from alerts.Delivery; its table keeps its name (no data moves)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("reports", "0004_models_to_exports")]

    operations = [
        migrations.AlterModelTable(name="delivery", table="reports_delivery"),
        migrations.RenameModel(old_name="Delivery", new_name="ReportDelivery"),
    ]
