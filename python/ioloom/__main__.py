from ioloom.cli import main

main()
