"""Who may do what, under every renderer: organizations' access rules and roles (access), the user's
preferences (time zone) and personal API tokens (models, tokens). The console's pages and API and the reports
import it; it imports none of them."""
