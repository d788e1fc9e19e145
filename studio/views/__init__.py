"""What each page draws, one package per page; the pages in ``app_pages/`` route to these."""
